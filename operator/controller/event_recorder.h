// Kubernetes Events about TrainingJobs (`kubectl describe tj` shows them): creates, deletes,
// restarts, failures. Best-effort, as in client-go: a failed write is logged, never returned.
#ifndef PSFLOW_OPERATOR_CONTROLLER_EVENT_RECORDER_H_
#define PSFLOW_OPERATOR_CONTROLLER_EVENT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "operator/kube/kube_client.h"

namespace psflow::controller {

enum class EventType { kNormal, kWarning };

class EventRecorder {
 public:
  EventRecorder(kube::KubeClient& client, std::string component,
                std::function<absl::Time()> now = absl::Now);

  // A core/v1 Event whose involvedObject is `object` (kind, name, namespace, uid from it).
  void Record(const kube::Json& object, EventType type, const std::string& reason,
              const std::string& message);
  int64_t recorded() const { return recorded_.load(); }

 private:
  kube::KubeClient& client_;
  std::string component_;
  std::function<absl::Time()> now_;
  std::atomic<int64_t> recorded_{0};
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_EVENT_RECORDER_H_
