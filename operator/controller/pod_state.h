// What the operator reads from a replica's pod: phase, readiness, restarts and how its main
// container ended (api/job_policy.h decides what follows).
#ifndef PSFLOW_OPERATOR_CONTROLLER_POD_STATE_H_
#define PSFLOW_OPERATOR_CONTROLLER_POD_STATE_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/api/training_job.h"

namespace psflow::controller {

enum class PodPhase { kPending, kRunning, kSucceeded, kFailed, kUnknown };

struct PodState {
  PodPhase phase = PodPhase::kUnknown;
  bool ready = false;          // condition Ready is True
  bool being_deleted = false;  // metadata.deletionTimestamp set
  // Sum of containerStatuses[].restartCount (kubelet restarts); a negative count reads as 0, the
  // sum stops at INT_MAX.
  int restarts = 0;
  // The main container's own restartCount (its process restarted in place; a sidecar's restarts
  // are not its), negative read as 0.
  int main_restarts = 0;
  // Whether the main container has started: it runs, has terminated, or was restarted.
  bool main_started = false;
  // How the main container last ended: state.terminated, else lastState.terminated.
  std::optional<int> exit_code;
  std::string reason;  // "OOMKilled", "Error", "Completed", or the pod's own ("Evicted")
  std::string message;
  // While the pod cannot be scheduled (condition PodScheduled False, reason Unschedulable): the
  // scheduler's message ("0/1 nodes are available: 1 Insufficient cpu."); else empty.
  std::string unschedulable;
  // spec.schedulingGates by name: while any is there the scheduler does not consider the pod. A
  // queue sets them (Kueue's kueue.x-k8s.io/admission, added by its webhook as the pod is made)
  // and removes them when it admits the pod's group.
  std::vector<std::string> scheduling_gates;
  // Every condition of the pod, type -> status ("DisruptionTarget" -> "True": preempted, evicted,
  // deleted for a lost node), for the failure rules (api/failure_policy.h).
  std::map<std::string, std::string> conditions;
  // Set when the status is not the pod's own, saying what it claims: it has the pod scheduled
  // (condition PodScheduled True, whose time the API server sets as a scheduler binds the pod)
  // more than a second before the pod was made (metadata.creationTimestamp, the API server's clock
  // too). It is an earlier pod's of the same name, written onto this one: seen on the test
  // clusters' v1.26 node when a pod was made again under the name of one just deleted (who
  // writes it is not known; tests/control_plane keeps an audit log to find out). Under the pod
  // restartPolicy Never or OnFailure a terminated container may not be reported running again,
  // so its kubelet cannot correct it. A pod whose maker set spec.nodeName is never bound (its
  // kubelet dates PodScheduled by the node's clock) and is not judged so. Such a pod reads as
  // Pending and not started, with no exit, restarts or conditions (its scheduling gates stay);
  // the operator deletes it and makes it again, counted nowhere (job_decision.h). So is a pod on
  // no node (spec.nodeName empty: gated, or not yet scheduled) whose status says its main
  // container ran or gives it a pod IP, whatever the times.
  std::string stale_status;

  bool Active() const { return phase == PodPhase::kPending || phase == PodPhase::kRunning; }
  // "exit code 137 (OOMKilled)", "Evicted: <message>", "unknown cause".
  std::string DescribeEnd() const;
};

// The name of the main container of a pod's spec: "psflow" when it has one, else the first
// container's; "" when there is none.
std::string MainContainerName(const nlohmann::json& pod);

// Never throws: a malformed pod reads as phase Unknown with no details.
PodState ReadPodState(const nlohmann::json& pod);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_POD_STATE_H_
