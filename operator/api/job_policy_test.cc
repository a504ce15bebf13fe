#include "operator/api/job_policy.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace psflow::api {
namespace {

TrainingJob MakeJob(RestartPolicy policy, int chiefs = 0, int workers = 2, int evaluators = 1) {
  TrainingJob job;
  job.name = "j";
  auto add = [&](ReplicaType type, int n) {
    if (n == 0) return;
    ReplicaSpec spec;
    spec.replicas = n;
    spec.restart_policy = policy;
    job.replica_specs[type] = spec;
  };
  add(ReplicaType::kChief, chiefs);
  add(ReplicaType::kPS, 1);
  add(ReplicaType::kWorker, workers);
  add(ReplicaType::kEvaluator, evaluators);
  return job;
}

struct EndCase {
  RestartPolicy policy;
  ReplicaType type;
  std::optional<int> exit_code;  // nullopt: evicted
  ReplicaOutcome outcome;
};

std::string Name(ReplicaOutcome o) {
  switch (o) {
    case ReplicaOutcome::kCompleted:
      return "Completed";
    case ReplicaOutcome::kRestart:
      return "Restart";
    case ReplicaOutcome::kRestartUncounted:
      return "RestartUncounted";
    case ReplicaOutcome::kFailJob:
      return "FailJob";
    case ReplicaOutcome::kLeftEnded:
      return "LeftEnded";
  }
  return "?";
}

using R = ReplicaType;
using P = RestartPolicy;
using O = ReplicaOutcome;

// Every restartPolicy against every way a replica of each type can end.
TEST(JobPolicy, WhatFollowsTheEndOfAReplica) {
  const EndCase cases[] = {
      // A trainer that finished is done under every policy: Always never re-runs it.
      {P::kNever, R::kWorker, 0, O::kCompleted},
      {P::kOnFailure, R::kWorker, 0, O::kCompleted},
      {P::kAlways, R::kWorker, 0, O::kCompleted},
      {P::kExitCode, R::kWorker, 0, O::kCompleted},
      {P::kAlways, R::kChief, 0, O::kCompleted},
      // Failures of trainers.
      {P::kNever, R::kWorker, 1, O::kFailJob},
      {P::kNever, R::kWorker, 137, O::kFailJob},
      {P::kNever, R::kWorker, std::nullopt, O::kFailJob},
      {P::kOnFailure, R::kWorker, 1, O::kRestart},
      {P::kOnFailure, R::kWorker, std::nullopt, O::kRestart},
      {P::kAlways, R::kChief, 2, O::kRestart},
      {P::kExitCode, R::kWorker, 1, O::kFailJob},
      {P::kExitCode, R::kWorker, 127, O::kFailJob},
      {P::kExitCode, R::kWorker, 137, O::kRestart},
      {P::kExitCode, R::kWorker, 143, O::kRestart},
      {P::kExitCode, R::kWorker, std::nullopt, O::kRestart},
      // A ps never finishes by itself: even exit 0 is a failure, restarted only under Always.
      {P::kNever, R::kPS, 0, O::kFailJob},
      {P::kOnFailure, R::kPS, 0, O::kRestart},  // stopped by SIGTERM (liveness, eviction)
      {P::kExitCode, R::kPS, 0, O::kRestart},
      {P::kAlways, R::kPS, 0, O::kRestart},
      {P::kOnFailure, R::kPS, 137, O::kRestart},
      {P::kExitCode, R::kPS, 1, O::kFailJob},
      // An evaluator never decides the job's outcome.
      {P::kNever, R::kEvaluator, 0, O::kCompleted},
      {P::kNever, R::kEvaluator, 1, O::kLeftEnded},
      {P::kExitCode, R::kEvaluator, 2, O::kLeftEnded},
      {P::kOnFailure, R::kEvaluator, 1, O::kRestart},
  };
  for (const EndCase& c : cases) {
    const TrainingJob job = MakeJob(c.policy, c.type == R::kChief ? 1 : 0);
    const ReplicaOutcome got =
        OnReplicaEnd(job, c.type, ReplicaExit{.exit_code = c.exit_code, .conditions = {}});
    EXPECT_EQ(Name(got), Name(c.outcome))
        << RestartPolicyName(c.policy) << " " << ReplicaTypeName(c.type) << " exit "
        << (c.exit_code ? std::to_string(*c.exit_code) : "none");
  }
}

// podFailurePolicy rules come before the restartPolicy; without a matching rule a disruption
// (DisruptionTarget True) restarts uncounted under every policy; a success is never a failure.
TEST(JobPolicy, FailureRulesAndTheDisruptionDefaultComeBeforeTheRestartPolicy) {
  const std::map<std::string, std::string> disrupted = {{"DisruptionTarget", "True"}};
  TrainingJob job = MakeJob(P::kOnFailure);
  FailureRule fail_on_3;
  fail_on_3.action = FailureAction::kFailJob;
  fail_on_3.on_exit_codes = ExitCodeRequirement{true, {3}};
  FailureRule count_disruptions;
  count_disruptions.action = FailureAction::kCount;
  count_disruptions.on_pod_conditions = {{"DisruptionTarget", "True"}};
  FailureRule ignore_42;
  ignore_42.action = FailureAction::kIgnore;
  ignore_42.on_exit_codes = ExitCodeRequirement{true, {42}};
  job.replica_specs[R::kWorker].failure_rules = {fail_on_3, ignore_42};
  job.replica_specs[R::kPS].failure_rules = {count_disruptions};
  job.replica_specs[R::kEvaluator].failure_rules = {fail_on_3};
  job.replica_specs[R::kChief] = job.replica_specs[R::kWorker];
  job.replica_specs[R::kChief].replicas = 1;
  job.replica_specs[R::kChief].failure_rules.clear();
  const auto check = [&](R type, std::optional<int> code,
                         const std::map<std::string, std::string>& conditions, ReplicaOutcome want,
                         const std::string& why) {
    const ReplicaExit exit{.exit_code = code, .conditions = conditions};
    EXPECT_EQ(Name(OnReplicaEnd(job, type, exit)), Name(want))
        << ReplicaTypeName(type) << " " << why;
    EXPECT_EQ(FailureRuleReason(job, type, exit), why) << ReplicaTypeName(type);
  };
  check(R::kWorker, 3, {}, O::kFailJob, "podFailurePolicy rule 1 (FailJob on exit codes In [3])");
  check(R::kWorker, 42, {}, O::kRestartUncounted,
        "podFailurePolicy rule 2 (Ignore on exit codes In [42])");
  check(R::kWorker, 1, {}, O::kRestart, "");  // no rule: OnFailure restarts, counted
  check(R::kWorker, std::nullopt, disrupted, O::kRestartUncounted,
        "a disruption (DisruptionTarget): not counted against backoffLimit");
  check(R::kWorker, 0, disrupted, O::kCompleted, "");
  check(R::kPS, std::nullopt, disrupted, O::kRestart,
        "podFailurePolicy rule 1 (Count on pod condition DisruptionTarget=True)");
  // A rule's FailJob holds for an evaluator too: the user asked for it.
  check(R::kEvaluator, 3, {}, O::kFailJob,
        "podFailurePolicy rule 1 (FailJob on exit codes In [3])");
  check(R::kEvaluator, 1, {}, O::kRestart, "");
  check(R::kChief, std::nullopt, {{"DisruptionTarget", "False"}}, O::kRestart, "");
  // Under Never, a disruption is not the program's failure either.
  job = MakeJob(P::kNever);
  EXPECT_EQ(
      Name(OnReplicaEnd(job, R::kWorker, {.exit_code = std::nullopt, .conditions = disrupted})),
      "RestartUncounted");
  EXPECT_EQ(Name(OnReplicaEnd(job, R::kWorker, {.exit_code = std::nullopt, .conditions = {}})),
            "FailJob");
}

TEST(JobPolicy, TheChiefIsChiefZeroElseWorkerZero) {
  const TrainingJob with_chief = MakeJob(P::kNever, 1);
  EXPECT_TRUE(IsChief(with_chief, R::kChief, 0));
  EXPECT_FALSE(IsChief(with_chief, R::kWorker, 0));
  const TrainingJob without = MakeJob(P::kNever, 0);
  EXPECT_TRUE(IsChief(without, R::kWorker, 0));
  EXPECT_FALSE(IsChief(without, R::kWorker, 1));
  EXPECT_FALSE(IsChief(without, R::kPS, 0));
  EXPECT_FALSE(IsChief(without, R::kEvaluator, 0));
}

TEST(JobPolicy, BackoffLimitDefaultsToSixAndEvaluatorsDoNotCount) {
  TrainingJob job = MakeJob(P::kOnFailure);
  EXPECT_EQ(BackoffLimit(job), 6);
  job.run_policy.backoff_limit = 0;
  EXPECT_EQ(BackoffLimit(job), 0);
  EXPECT_TRUE(CountsAgainstBackoff(R::kWorker));
  EXPECT_TRUE(CountsAgainstBackoff(R::kPS));
  EXPECT_TRUE(CountsAgainstBackoff(R::kChief));
  EXPECT_FALSE(CountsAgainstBackoff(R::kEvaluator));
}

TEST(JobPolicy, SuccessByPolicy) {
  std::set<std::pair<R, int>> done;
  auto completed = [&](R type, int index) { return done.count({type, index}) > 0; };
  TrainingJob job = MakeJob(P::kNever, 0, 3);
  EXPECT_FALSE(JobSucceeded(job, completed));
  done.insert({R::kWorker, 1});
  EXPECT_FALSE(JobSucceeded(job, completed));
  done.insert({R::kWorker, 0});
  EXPECT_TRUE(JobSucceeded(job, completed));
  EXPECT_EQ(SuccessReason(job), "Worker 0 completed");

  job.success_policy = SuccessPolicy::kAllWorkers;
  EXPECT_FALSE(JobSucceeded(job, completed));
  done.insert({R::kWorker, 2});
  EXPECT_TRUE(JobSucceeded(job, completed));  // evaluators and the ps are not waited for
  EXPECT_EQ(SuccessReason(job), "every worker completed");

  TrainingJob chief = MakeJob(P::kNever, 1, 2);
  EXPECT_FALSE(JobSucceeded(chief, completed));  // Worker 0 is not the chief here
  done.insert({R::kChief, 0});
  EXPECT_TRUE(JobSucceeded(chief, completed));
  EXPECT_EQ(SuccessReason(chief), "Chief 0 completed");
}

TEST(JobPolicy, PodRestartPolicyNeverRerunsAFinishedTrainer) {
  EXPECT_STREQ(PodRestartPolicy(R::kWorker, P::kAlways), "OnFailure");
  EXPECT_STREQ(PodRestartPolicy(R::kChief, P::kAlways), "OnFailure");
  EXPECT_STREQ(PodRestartPolicy(R::kEvaluator, P::kAlways), "OnFailure");
  EXPECT_STREQ(PodRestartPolicy(R::kPS, P::kAlways), "Always");
  EXPECT_STREQ(PodRestartPolicy(R::kWorker, P::kOnFailure), "OnFailure");
  EXPECT_STREQ(PodRestartPolicy(R::kPS, P::kOnFailure), "OnFailure");
  EXPECT_STREQ(PodRestartPolicy(R::kWorker, P::kExitCode), "Never");
  EXPECT_STREQ(PodRestartPolicy(R::kWorker, P::kNever), "Never");
}

TEST(JobPolicy, ActiveDeadline) {
  TrainingJob job = MakeJob(P::kNever);
  EXPECT_FALSE(ActiveDeadline(job).has_value());
  job.run_policy.active_deadline_seconds = 90;
  EXPECT_EQ(ActiveDeadline(job), absl::Seconds(90));
}

}  // namespace
}  // namespace psflow::api
