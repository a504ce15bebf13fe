// Plays the kubelet of ControlPlane::kNodeName for one namespace of a real API server, since the
// test control plane has neither a kubelet nor a scheduler: a thread binds every new pod of the
// namespace to the node (pods/binding, as the scheduler does) and finishes graceful deletions
// (a pod marked for deletion is deleted with grace period 0, as a kubelet does once its
// containers stopped). Phases, exit codes and restarts change only when the test says so, through
// pods/status with the statuses a kubelet writes (tests/kube/pod_status.h).
//
// Thread-safe. Every method retries a 409 Conflict with a fresh read.
#ifndef PSFLOW_TESTS_CONTROL_PLANE_TEST_KUBELET_H_
#define PSFLOW_TESTS_CONTROL_PLANE_TEST_KUBELET_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "operator/kube/kube_client.h"

namespace psflow::kubereal {

class TestKubelet {
 public:
  // Starts the thread (it looks at the namespace's pods every 50 ms).
  TestKubelet(kube::KubeClient& client, std::string ns);
  ~TestKubelet();  // stops and joins it
  TestKubelet(const TestKubelet&) = delete;
  TestKubelet& operator=(const TestKubelet&) = delete;

  // The pod reaches `phase` ("Running", "Succeeded", "Failed"; reason e.g. "OOMKilled",
  // "Evicted"), with the status a kubelet writes for it. A Running pod gets podIP `pod_ip`.
  absl::Status SetPhase(absl::string_view pod, absl::string_view phase, int exit_code = 0,
                        absl::string_view reason = "", absl::string_view pod_ip = "127.0.0.1");
  // The pod evicted under node pressure, as a v1.26 kubelet writes it: phase Failed, reason
  // Evicted, the main container killed (exit 137), and the condition DisruptionTarget True
  // (reason TerminationByKubelet) that marks a disruption rather than a failure of the program.
  absl::Status Evict(absl::string_view pod);
  // The main container exited with `exit_code`/`reason` and was restarted in place
  // (restartCount + 1), as the kubelet does under the pod's restartPolicy OnFailure/Always.
  absl::Status RestartInPlace(absl::string_view pod, int exit_code, absl::string_view reason);
  // While held, pods marked for deletion stay Terminating (a kubelet still stopping them).
  void HoldDeletions(bool hold) { hold_deletions_ = hold; }

  int64_t pods_bound() const { return bound_; }
  int64_t deletions_finished() const { return finished_; }

 private:
  void Loop(std::stop_token stop);
  // Binds the pod to the node (pods/binding), as the scheduler does.
  absl::Status Bind(const std::string& pod);
  // Reads the pod, computes its new status with `change`, writes it through pods/status.
  absl::Status ChangeStatus(
      absl::string_view pod,
      const std::function<absl::StatusOr<kube::Json>(const kube::Json& pod)>& change);

  kube::KubeClient& client_;
  const std::string ns_;
  std::atomic<bool> hold_deletions_{false};
  std::atomic<int64_t> bound_{0};
  std::atomic<int64_t> finished_{0};
  std::jthread thread_;
};

}  // namespace psflow::kubereal

#endif  // PSFLOW_TESTS_CONTROL_PLANE_TEST_KUBELET_H_
