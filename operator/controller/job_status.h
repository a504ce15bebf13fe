// A TrainingJob's status as the operator keeps it (the CRD's .status), and the rules that keep
// its conditions consistent.
//
// Conditions: Created, Running, Restarting, Succeeded, Failed, Suspended, ProgressLost,
// Unschedulable, Queued. At most one of Running/Restarting is True, and neither while the job is
// Suspended or Queued; Succeeded and Failed are terminal and exclusive; a condition's
// lastTransitionTime changes only when its status does, so an unchanged job yields an identical
// status (the operator then writes nothing). ProgressLost, once True, stays True (its
// lastTransitionTime says when training progress was first lost, lastUpdateTime the latest) and
// never decides the state.
#ifndef PSFLOW_OPERATOR_CONTROLLER_JOB_STATUS_H_
#define PSFLOW_OPERATOR_CONTROLLER_JOB_STATUS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "operator/api/training_job.h"

namespace psflow::controller {

enum class ConditionType {
  kCreated,
  kRunning,
  kRestarting,
  kSucceeded,
  kFailed,
  kSuspended,
  kProgressLost,
  kUnschedulable,  // True while a pod of the job cannot be scheduled
  kQueued,         // True while a queue holds back every pod of the job (their scheduling gates)
};
const char* ConditionTypeName(ConditionType type);

struct Condition {
  ConditionType type;
  bool status = false;  // "True" / "False"
  std::string reason;
  std::string message;
  std::string last_update_time;      // RFC3339
  std::string last_transition_time;  // RFC3339
  bool operator==(const Condition&) const = default;
};

// Indexes as Kubernetes Indexed Jobs write them: "0,2-4,7".
std::string FormatIndexes(const std::set<int>& indexes);
std::set<int> ParseIndexes(const std::string& text);  // malformed parts are skipped

// How a replica's pod last ended badly, as `kubectl describe tj` shows it.
struct ReplicaFailure {
  std::string reason;  // "Error", "OOMKilled", "Evicted", "DeadlineExceeded", "ImagePullBackOff"...
  std::optional<int> exit_code;
  std::string message;
  std::string pod;
  std::string time;  // RFC3339: when the operator saw it
  bool operator==(const ReplicaFailure&) const = default;
};

// One task index of a replica type, kept only once it has failed or restarted.
struct IndexStatus {
  // Restarts of this index: replaced_restarts + the kubelet restarts of its pod now.
  int restarts = 0;
  // Restarts already folded in: each replacement of a failed pod counts one plus the kubelet
  // restarts that pod had (persisted, as "replacedPodRestarts", since those pods are gone).
  int replaced_restarts = 0;
  // The failed pod whose replacement is counted in replaced_restarts (persisted, as
  // "replacedPodUID"): written before that pod is deleted, so a pass that finds it still there
  // (its delete failed) deletes it again without counting it twice.
  std::string replaced_pod_uid;
  // The live pod whose kubelet restarts are restarts - replaced_restarts (persisted, as
  // "countedPodUID"; empty when none is counted). A pass that finds another pod there folds
  // those restarts in: the counted pod was replaced between two passes.
  std::string counted_pod_uid;
  std::optional<ReplicaFailure> last_failure;
  bool operator==(const IndexStatus&) const = default;
};

// The pod a ps task was last seen running in (ps_restarts.h compares each pass's pods with it).
struct ObservedPod {
  std::string uid;
  int restarts = 0;  // the main container's restartCount then
  bool operator==(const ObservedPod&) const = default;
};

struct ReplicaStatus {
  int active = 0;                   // pods Pending or Running
  int ready = 0;                    // pods Running and ready
  int succeeded = 0;                // indexes completed
  int failed = 0;                   // pods seen Failed (each restart counts one)
  int restarts = 0;                 // sum of indexes[*].restarts
  std::set<int> completed_indexes;  // kept so a deleted completed pod is never run again
  std::map<int, IndexStatus> indexes;
  // PS only ("observedPods"): index -> the pod its task last ran in, from the first time it runs.
  std::map<int, ObservedPod> observed_pods;

  int ReplacedRestarts() const;  // sum of indexes[*].replaced_restarts, saturated to int
  bool operator==(const ReplicaStatus&) const = default;
};

struct JobStatus {
  std::vector<Condition> conditions;
  std::map<api::ReplicaType, ReplicaStatus> replica_statuses;
  std::string start_time;       // RFC3339, empty when unset
  std::string completion_time;  // RFC3339, empty when unset
  int64_t observed_generation = 0;
  int restart_count =
      0;                // sum of replica_statuses[*].restarts (backoffLimit leaves evaluators out)
  std::string workers;  // "ready/total" for the printer column
  std::string worker_selector;
  std::optional<double> words_per_second;
  std::optional<double> examples_per_second;

  // Tolerates a missing or malformed status (fields that do not parse read as unset).
  static JobStatus FromJson(const nlohmann::json& status);
  nlohmann::json ToJson() const;

  const Condition* Find(ConditionType type) const;
  bool Is(ConditionType type) const;  // the condition exists and is True
  bool Finished() const { return Is(ConditionType::kSucceeded) || Is(ConditionType::kFailed); }
  // "Failed", "Succeeded", "Suspended", "Queued", "Restarting", "Running", "Created" or "" (the
  // strongest True condition, in that order): the printer column.
  std::string State() const;

  // Sets a condition, keeping the invariants: Running and Restarting exclude each other (setting
  // one True sets the other False); Queued True sets Running and Restarting False; Succeeded,
  // Failed or Suspended True sets Running, Restarting and Queued False. A
  // condition that does not exist yet is only recorded when `status` is true.
  void SetCondition(ConditionType type, bool status, const std::string& reason,
                    const std::string& message, absl::Time now);
  bool operator==(const JobStatus&) const = default;
};

std::string FormatTimestamp(absl::Time t);  // RFC3339 UTC, seconds
// absl::InfinitePast() when empty or malformed.
absl::Time ParseTimestamp(const std::string& text);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_JOB_STATUS_H_
