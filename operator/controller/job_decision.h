// The decision step of a reconcile pass over an active (not finished, not suspended) TrainingJob:
// a pure function from what the pass observed (its replicas' pods and services, the status so
// far, the time) to what must happen (objects to create, pods to replace, the outcome), by the
// rules of api/job_policy.h. The reconciler observes, calls Decide, then acts; nothing here
// touches the API server, so every rule is table-tested (job_decision_test.cc).
#ifndef PSFLOW_OPERATOR_CONTROLLER_JOB_DECISION_H_
#define PSFLOW_OPERATOR_CONTROLLER_JOB_DECISION_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "operator/api/training_job.h"
#include "operator/controller/job_status.h"
#include "operator/controller/pod_state.h"

namespace psflow::controller {

using ReplicaSlot = std::pair<api::ReplicaType, int>;

// "Worker 0".
std::string ReplicaLabel(api::ReplicaType type, int index);
// "Worker 0 (pod mnist-worker-0)": how messages and events name a replica's pod.
std::string ReplicaPodLabel(api::ReplicaType type, int index, const std::string& pod);

// One replica slot `<job>-<type>-<index>` of the spec as the pass found it.
struct SlotObservation {
  api::ReplicaType type = api::ReplicaType::kWorker;
  int index = 0;
  std::optional<PodState> pod;  // nullopt: no pod of this job's incarnation
  std::string pod_name;
  std::string pod_uid;
};

struct JobObservation {
  std::vector<SlotObservation> slots;  // every slot of the spec, in type then index order
  bool has_service = false;            // the job's headless Service (replica_objects.h)
  absl::Time now;
  absl::Time start;  // status.startTime
  // When a queue last admitted the job: the pass that saw a pod of the queued job ungated (the
  // Queued condition's turn to False with reason Admitted; `now` on that pass itself);
  // InfinitePast when it never waited in a queue, or has not since it was suspended or ended.
  absl::Time admitted = absl::InfinitePast();
};

struct EndedPod {
  ReplicaSlot slot;
  PodState state;  // how its pod ended
  std::string pod_name;
  // Restarts only: whether it counts against backoffLimit (not for a disruption or a rule's
  // Ignore), and the rule or default that decided, "" when the restartPolicy did.
  bool counted = true;
  std::string why = {};
  std::string Label() const { return ReplicaPodLabel(slot.first, slot.second, pod_name); }
};

struct Decision {
  // Set when the job ends now: (reason, message) of the Failed condition...
  std::optional<std::pair<std::string, std::string>> failure;
  // ...or, when nothing failed, the success message ("Worker 0 completed").
  std::optional<std::string> success;
  // Indexes that completed in this pass (trainers or evaluators that exited 0).
  std::vector<ReplicaSlot> completed;
  // Pods seen Failed (or a ps seen ended) in this pass, with how they ended; each counts once in
  // status.replicaStatuses[type].failed and sets the index's lastFailure.
  std::vector<EndedPod> ended_badly;
  std::vector<EndedPod> restarts;  // failed pods to delete and run again
  // Pods to delete and make again, counted nowhere: failed pods whose restart the status already
  // counts (IndexStatus::replaced_pod_uid names them: their delete failed after the count was
  // written), and pods whose status is not their own (PodState::stale_status).
  std::vector<EndedPod> replacing;
  // Evaluators that failed for good, first seen in this pass (also in ended_badly).
  std::vector<EndedPod> left_ended;
  std::vector<ReplicaSlot> create_pods;
  bool create_service = false;  // the job's Service is missing
  bool all_running = false;     // every pod of every slot Running (completed indexes aside)
  // Pods the scheduler cannot place now, with its message (PodState::unschedulable).
  std::vector<std::pair<ReplicaSlot, std::string>> unschedulable;
  // When every pod the job has that may yet run (Pending or Running; completed replicas and pods
  // being deleted aside) is held back by scheduling gates (PodState::scheduling_gates): those
  // pods, with the gates named; the job
  // waits for a queue's admission. Meanwhile neither activeDeadlineSeconds nor
  // schedulingTimeoutSeconds runs (a queued job is not late), and both count from the later of
  // its start and its latest admission (JobObservation::admitted). Empty when any of its pods is
  // not gated: a gated pod beside others (a replacement its queue has yet to release) is only a
  // Pending pod, and the job's clocks run on.
  std::vector<std::pair<ReplicaSlot, std::string>> queued;
  // Some pod that may yet run (as above) has no gate: a queued job has been admitted.
  bool pod_ungated = false;
  // Set in place of `failure` when schedulingTimeoutSeconds passes for a job whose suspend is in
  // use (it was suspended before: whoever queues it admits it by resuming it), as (reason,
  // message): the job suspends itself, so that its queue can give what it holds to others and
  // admit it again later.
  std::optional<std::pair<std::string, std::string>> suspend;
  // The restarts the backoff limit counts, these included.
  int counted_restarts = 0;
  std::optional<absl::Duration> requeue_after;  // until the deadline or scheduling timeout
};

// Decides what follows from `observed` for `job` whose status so far is `status` (its completed
// indexes and the restarts of replaced pods). Pure.
Decision Decide(const api::TrainingJob& job, const std::string& job_key, const JobStatus& status,
                const JobObservation& observed);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_JOB_DECISION_H_
