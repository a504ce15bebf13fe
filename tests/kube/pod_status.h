// Pod statuses as the kubelet writes them, for the kubelet stand-ins of ObjectStore (there is no
// kubelet in tests). Pure functions of the pod, the request and the time.
#ifndef PSFLOW_TESTS_KUBE_POD_STATUS_H_
#define PSFLOW_TESTS_KUBE_POD_STATUS_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psflow::kubetest {

// The status of `pod` once it reaches `phase` ("Pending", "Running", "Succeeded", "Failed"):
//   Pending:   PodScheduled, containers waiting (ContainerCreating);
//   Running:   Ready, podIP, containers running and ready;
//   Succeeded, Failed: containers terminated with `exit_code` and `reason` ("" picks
//              "Completed" for 0, "Error" otherwise; "OOMKilled" etc. as given);
//   Failed with reason "Evicted": status.reason "Evicted" and the kubelet's message, containers
//              terminated with `exit_code` (137 when the kubelet killed them).
// Restart counts and last states already in the status are kept. One container status per
// spec.containers[] entry. INVALID_ARGUMENT for an unknown phase, Succeeded with a non-zero
// exit code, "Evicted" with a phase other than Failed, or a pod without containers.
absl::StatusOr<nlohmann::json> PodStatusForPhase(const nlohmann::json& pod, absl::string_view phase,
                                                 int exit_code, absl::string_view reason,
                                                 absl::Time now);

// The status after the kubelet restarted `container` ("" for the first one) following its exit
// with `exit_code`/`reason`: restartCount + 1, lastState.terminated, running again.
// FAILED_PRECONDITION when spec.restartPolicy forbids the restart (Never, or OnFailure after
// exit code 0); INVALID_ARGUMENT for an unknown container.
absl::StatusOr<nlohmann::json> PodStatusAfterRestart(const nlohmann::json& pod,
                                                     absl::string_view container, int exit_code,
                                                     absl::string_view reason, absl::Time now);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_POD_STATUS_H_
