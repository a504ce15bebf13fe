// The rules of a TrainingJob's life, as pure functions, for both `psflow run` (processes) and
// psflow-operator (pods): which replica is the chief, what happens when a replica ends, how many
// restarts the job allows, when it has succeeded, and what its pods' restartPolicy is.
//
// A replica "ends" when its process exits (locally) or its pod reaches Succeeded or Failed
// (Kubernetes). The kubelet's in-place restarts of a container (pod restartPolicy OnFailure or
// Always) are restarts too: they count against the backoff limit like replacements do.
#ifndef PSFLOW_OPERATOR_API_JOB_POLICY_H_
#define PSFLOW_OPERATOR_API_JOB_POLICY_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "operator/api/training_job.h"

namespace psflow::api {

// How a replica ended. exit_code: the main container's or process's exit code, 128+N after
// signal N (137: SIGKILL, the OOM killer's); nullopt when it ended without one (evicted, node
// lost).
struct ReplicaExit {
  std::optional<int> exit_code;
  // The pod's conditions, type -> status (DisruptionTarget: "True" when Kubernetes preempted,
  // evicted or deleted it for a lost node); none for a local process.
  std::map<std::string, std::string> conditions;
  bool ok() const { return exit_code.has_value() && *exit_code == 0; }
};

// Chief and Worker replicas train; the job's success is theirs.
bool IsTrainer(ReplicaType type);
// The replica whose completion ends a ChiefOrWorker0 job: Chief 0, or Worker 0 without a Chief.
bool IsChief(const TrainingJob& job, ReplicaType type, int index);

enum class ReplicaOutcome {
  kCompleted,         // a trainer (or an evaluator) finished its work: never run again
  kRestart,           // run it again (a new process or pod), counted against the backoff limit
  kRestartUncounted,  // run it again, not counted (a disruption, or a rule's Ignore)
  kFailJob,           // the job fails
  kLeftEnded,         // an evaluator that failed and is not restarted: the job goes on without it
};

// What follows when replica `type` of `job` ended with `exit`:
//  - a trainer or evaluator that exited 0 completed, under every restartPolicy (Always does not
//    re-run finished work);
//  - otherwise the replica type's podFailurePolicy rules decide when one matches
//    (api/failure_policy.h: FailJob fails the job, even for an evaluator; Count restarts,
//    counted; Ignore restarts, not counted); when none does, a pod with DisruptionTarget True
//    (preempted, evicted, its node lost: no fault of the program) is restarted, not counted;
//  - otherwise its restartPolicy decides: Never: no restart; OnFailure and Always: restart;
//    ExitCode: restart after 128+N (a signal: OOM-killed, preempted) or no exit code (evicted),
//    while 1-127 are the program's own verdict and final;
//  - a ps never completes: it runs until stopped. Stopped with SIGTERM (a failed liveness probe,
//    an eviction, a drain) it writes its final checkpoint and exits 0, which the kubelet does not
//    restart under OnFailure; so a ps that exited 0 before the job was over is restarted under
//    every policy but Never (a replacement pod in Kubernetes, a new process locally); any other
//    end of a ps follows its restartPolicy as a failure;
//  - a failure not restarted fails the job, except an evaluator's: an evaluator never decides
//    the job's outcome.
ReplicaOutcome OnReplicaEnd(const TrainingJob& job, ReplicaType type, const ReplicaExit& exit);
// Why OnReplicaEnd decided as it did when a failure rule or the disruption default did
// ("podFailurePolicy rule 1 (FailJob on exit codes In [3])", "a disruption (DisruptionTarget):
// not counted against backoffLimit"); "" when the restartPolicy did.
std::string FailureRuleReason(const TrainingJob& job, ReplicaType type, const ReplicaExit& exit);

// Whether restarts of `type` count against the backoff limit: all but the evaluator's.
bool CountsAgainstBackoff(ReplicaType type);

// Restarts the whole job allows: runPolicy.backoffLimit, else kDefaultBackoffLimit (a
// Kubernetes Job's default). The job fails at the first restart beyond it.
inline constexpr int kDefaultBackoffLimit = 6;
int BackoffLimit(const TrainingJob& job);

// Whether the job has succeeded, given which replica indexes completed: ChiefOrWorker0: the chief
// (IsChief) completed; AllWorkers: every Chief and Worker index did.
bool JobSucceeded(const TrainingJob& job,
                  const std::function<bool(ReplicaType type, int index)>& completed);
// Why, for the status and the log: "Chief 0 completed", "Worker 0 completed", "every worker
// completed".
std::string SuccessReason(const TrainingJob& job);

// Once the job succeeded, how long trainers still running may go on finishing their steps (their
// pods or processes, and the ps tasks they push to, stay) before the clean-up stops them:
// runPolicy.finishGraceSeconds, else kDefaultFinishGraceSeconds. Both sides use it: the operator
// before cleanPodPolicy deletes them, `psflow run` before it stops them.
inline constexpr int64_t kDefaultFinishGraceSeconds = 30;
absl::Duration FinishGrace(const TrainingJob& job);

// runPolicy.schedulingTimeoutSeconds: how long after its start (or resumption, or admission by
// a queue) a job that has never had every replica running may wait for that (pods the scheduler
// cannot place, images that do not come) before it fails with reason Unschedulable (or, when its
// suspend is in use, is suspended: controller/job_decision.h); nullopt: no limit.
std::optional<absl::Duration> SchedulingTimeout(const TrainingJob& job);

// runPolicy.activeDeadlineSeconds as a duration; nullopt without a deadline.
std::optional<absl::Duration> ActiveDeadline(const TrainingJob& job);

// The restartPolicy of the pods of replica `type` (Kubernetes' "Never", "OnFailure", "Always").
// The kubelet restarts in place what the kubelet can judge: OnFailure replicas (and Always ones,
// whose finished trainers must stay finished) get OnFailure; a ps under Always gets Always (it
// never finishes); Never and ExitCode get Never, and the operator decides from the exit code.
const char* PodRestartPolicy(ReplicaType type, RestartPolicy policy);

}  // namespace psflow::api

#endif  // PSFLOW_OPERATOR_API_JOB_POLICY_H_
