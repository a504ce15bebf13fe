#include "operator/api/job_policy.h"

#include "absl/strings/str_cat.h"

namespace psflow::api {

bool IsTrainer(ReplicaType type) {
  return type == ReplicaType::kChief || type == ReplicaType::kWorker;
}

bool IsChief(const TrainingJob& job, ReplicaType type, int index) {
  if (index != 0) return false;
  if (job.Replicas(ReplicaType::kChief) > 0) return type == ReplicaType::kChief;
  return type == ReplicaType::kWorker;
}

namespace {

bool PolicyRestarts(RestartPolicy policy, const ReplicaExit& exit) {
  switch (policy) {
    case RestartPolicy::kNever:
      return false;
    case RestartPolicy::kOnFailure:
      return !exit.ok();
    case RestartPolicy::kAlways:
      return true;
    case RestartPolicy::kExitCode:
      return !exit.exit_code || *exit.exit_code >= 128 || *exit.exit_code < 0;
  }
  return false;
}

FailureFacts Facts(const ReplicaExit& exit) { return {exit.exit_code, exit.conditions}; }

bool Disrupted(const ReplicaExit& exit) {
  auto it = exit.conditions.find(kDisruptionTarget);
  return it != exit.conditions.end() && it->second == "True";
}

// The action of the type's first matching rule, else the disruption default, else nullopt.
std::optional<FailureAction> RuleAction(const TrainingJob& job, ReplicaType type,
                                        const ReplicaExit& exit) {
  auto spec = job.replica_specs.find(type);
  if (spec != job.replica_specs.end()) {
    if (auto action = MatchFailureRules(spec->second.failure_rules, Facts(exit))) return action;
  }
  if (Disrupted(exit)) return kDefaultDisruptionAction;
  return std::nullopt;
}

}  // namespace

ReplicaOutcome OnReplicaEnd(const TrainingJob& job, ReplicaType type, const ReplicaExit& exit) {
  if (type != ReplicaType::kPS && exit.ok()) return ReplicaOutcome::kCompleted;
  auto spec = job.replica_specs.find(type);
  const RestartPolicy policy =
      spec == job.replica_specs.end() ? RestartPolicy::kNever : spec->second.restart_policy;
  if (!exit.ok()) {
    if (std::optional<FailureAction> action = RuleAction(job, type, exit)) {
      switch (*action) {
        case FailureAction::kFailJob:
          return ReplicaOutcome::kFailJob;
        case FailureAction::kCount:
          return ReplicaOutcome::kRestart;
        case FailureAction::kIgnore:
          return ReplicaOutcome::kRestartUncounted;
      }
    }
  }
  // A ps exits 0 only when stopped from outside (SIGTERM: a failed liveness probe, an eviction, a
  // drain, a user), after its final checkpoint: before the job is over that is no verdict of its
  // own, so every policy but Never brings it back.
  if (type == ReplicaType::kPS && exit.ok()) {
    return policy == RestartPolicy::kNever ? ReplicaOutcome::kFailJob : ReplicaOutcome::kRestart;
  }
  if (PolicyRestarts(policy, exit)) return ReplicaOutcome::kRestart;
  return type == ReplicaType::kEvaluator ? ReplicaOutcome::kLeftEnded : ReplicaOutcome::kFailJob;
}

std::string FailureRuleReason(const TrainingJob& job, ReplicaType type, const ReplicaExit& exit) {
  if (exit.ok()) return "";
  auto spec = job.replica_specs.find(type);
  if (spec != job.replica_specs.end()) {
    std::string rule = DescribeMatchedRule(spec->second.failure_rules, Facts(exit));
    if (!rule.empty()) return rule;
  }
  if (Disrupted(exit)) {
    return absl::StrCat("a disruption (", kDisruptionTarget, "): not counted against backoffLimit");
  }
  return "";
}

bool CountsAgainstBackoff(ReplicaType type) { return type != ReplicaType::kEvaluator; }

int BackoffLimit(const TrainingJob& job) {
  return job.run_policy.backoff_limit.value_or(kDefaultBackoffLimit);
}

bool JobSucceeded(const TrainingJob& job,
                  const std::function<bool(ReplicaType type, int index)>& completed) {
  if (job.success_policy == SuccessPolicy::kAllWorkers) {
    bool any = false;
    for (ReplicaType type : {ReplicaType::kChief, ReplicaType::kWorker}) {
      for (int i = 0; i < job.Replicas(type); ++i) {
        if (!completed(type, i)) return false;
        any = true;
      }
    }
    return any;
  }
  return job.Replicas(ReplicaType::kChief) > 0 ? completed(ReplicaType::kChief, 0)
                                               : completed(ReplicaType::kWorker, 0);
}

std::string SuccessReason(const TrainingJob& job) {
  if (job.success_policy == SuccessPolicy::kAllWorkers) return "every worker completed";
  return job.Replicas(ReplicaType::kChief) > 0 ? "Chief 0 completed" : "Worker 0 completed";
}

absl::Duration FinishGrace(const TrainingJob& job) {
  return absl::Seconds(job.run_policy.finish_grace_seconds.value_or(kDefaultFinishGraceSeconds));
}

std::optional<absl::Duration> SchedulingTimeout(const TrainingJob& job) {
  if (!job.run_policy.scheduling_timeout_seconds) return std::nullopt;
  return absl::Seconds(*job.run_policy.scheduling_timeout_seconds);
}

std::optional<absl::Duration> ActiveDeadline(const TrainingJob& job) {
  if (!job.run_policy.active_deadline_seconds) return std::nullopt;
  return absl::Seconds(*job.run_policy.active_deadline_seconds);
}

const char* PodRestartPolicy(ReplicaType type, RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kOnFailure:
      return "OnFailure";
    case RestartPolicy::kAlways:
      return type == ReplicaType::kPS ? "Always" : "OnFailure";
    case RestartPolicy::kNever:
    case RestartPolicy::kExitCode:
      return "Never";
  }
  return "Never";
}

}  // namespace psflow::api
