#include "operator/controller/job_decision.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace psflow::controller {
namespace {

using api::ReplicaType;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

api::TrainingJob MakeJob(api::RestartPolicy policy, int workers = 2, int evaluators = 0) {
  api::TrainingJob job;
  job.name = "j";
  for (auto [type, n] : {std::pair{ReplicaType::kPS, 1}, std::pair{ReplicaType::kWorker, workers},
                         std::pair{ReplicaType::kEvaluator, evaluators}}) {
    if (n == 0) continue;
    api::ReplicaSpec spec;
    spec.replicas = n;
    spec.restart_policy = policy;
    job.replica_specs[type] = spec;
  }
  return job;
}

PodState Pod(PodPhase phase, std::optional<int> exit_code = std::nullopt,
             const std::string& reason = "", int restarts = 0) {
  PodState s;
  s.phase = phase;
  s.ready = phase == PodPhase::kRunning;
  s.exit_code = exit_code;
  s.reason = reason;
  s.restarts = restarts;
  return s;
}

// The job's Service and every slot of `job` with a Running pod; `edit` changes some.
JobObservation AllRunning(const api::TrainingJob& job,
                          absl::Duration since_start = absl::Seconds(1)) {
  JobObservation o;
  o.start = kStart;
  o.now = kStart + since_start;
  o.has_service = true;
  for (const auto& [type, spec] : job.replica_specs) {
    for (int i = 0; i < spec.replicas; ++i) {
      SlotObservation& s = o.slots.emplace_back();
      s.type = type;
      s.index = i;
      s.pod = Pod(PodPhase::kRunning);
      s.pod_name = "j-" + std::string(api::TaskTypeName(type)) + "-" + std::to_string(i);
    }
  }
  return o;
}

SlotObservation& At(JobObservation& o, ReplicaType type, int index) {
  for (SlotObservation& s : o.slots) {
    if (s.type == type && s.index == index) return s;
  }
  ADD_FAILURE() << "no slot";
  return o.slots.front();
}

TEST(JobDecision, AMissingPodOrServiceIsCreatedAndTheJobIsNotRunningYet) {
  const api::TrainingJob job = MakeJob(api::RestartPolicy::kNever);
  JobObservation o = AllRunning(job);
  At(o, ReplicaType::kWorker, 1).pod.reset();
  o.has_service = false;
  const Decision d = Decide(job, "default/j", {}, o);
  ASSERT_EQ(d.create_pods.size(), 1u);
  EXPECT_EQ(d.create_pods[0], (ReplicaSlot{ReplicaType::kWorker, 1}));
  EXPECT_TRUE(d.create_service);
  EXPECT_FALSE(d.all_running);
  EXPECT_FALSE(d.failure);
  EXPECT_FALSE(d.success);
}

TEST(JobDecision, AllRunningIsRunning) {
  const api::TrainingJob job = MakeJob(api::RestartPolicy::kNever);
  const Decision d = Decide(job, "default/j", {}, AllRunning(job));
  EXPECT_TRUE(d.all_running);
  EXPECT_TRUE(d.create_pods.empty());
  EXPECT_FALSE(d.requeue_after);
}

TEST(JobDecision, WorkerZeroCompletingSucceedsEvenUnderAlways) {
  const api::TrainingJob job = MakeJob(api::RestartPolicy::kAlways);
  JobObservation o = AllRunning(job);
  At(o, ReplicaType::kWorker, 0).pod = Pod(PodPhase::kSucceeded, 0, "Completed");
  const Decision d = Decide(job, "default/j", {}, o);
  EXPECT_TRUE(d.restarts.empty());
  ASSERT_TRUE(d.success);
  EXPECT_EQ(*d.success, "Worker 0 completed");
  ASSERT_EQ(d.completed.size(), 1u);
}

TEST(JobDecision, ACompletedIndexIsNeverRunAgain) {
  const api::TrainingJob job = MakeJob(api::RestartPolicy::kNever);
  JobStatus status;
  status.replica_statuses[ReplicaType::kWorker].completed_indexes = {1};
  JobObservation o = AllRunning(job);
  At(o, ReplicaType::kWorker, 1).pod.reset();  // deleted after it completed
  const Decision d = Decide(job, "default/j", status, o);
  EXPECT_TRUE(d.create_pods.empty());
  EXPECT_TRUE(d.all_running);
}

// A ps stopped by SIGTERM (a failed liveness probe, an eviction) exits 0 and its OnFailure pod
// ends Succeeded, which the kubelet does not restart: the operator replaces it, under every
// policy but Never.
TEST(JobDecision, APsThatExitsZeroIsReplacedUnlessNever) {
  for (auto [policy, fails] : {std::pair{api::RestartPolicy::kOnFailure, false},
                               std::pair{api::RestartPolicy::kExitCode, false},
                               std::pair{api::RestartPolicy::kAlways, false},
                               std::pair{api::RestartPolicy::kNever, true}}) {
    const api::TrainingJob job = MakeJob(policy);
    JobObservation o = AllRunning(job);
    At(o, ReplicaType::kPS, 0).pod = Pod(PodPhase::kSucceeded, 0, "Completed");
    const Decision d = Decide(job, "default/j", {}, o);
    EXPECT_EQ(d.failure.has_value(), fails) << api::RestartPolicyName(policy);
    EXPECT_EQ(d.restarts.size(), fails ? 0u : 1u) << api::RestartPolicyName(policy);
    if (fails) {
      EXPECT_EQ(d.failure->second,
                "PS 0 (pod j-ps-0) exited before the job finished (exit code 0); restartPolicy "
                "Never does not restart it");
    }
  }
}

// Issue 29: a worker asking for more CPU than the node has stayed Pending and the job said
// nothing. The scheduler's word reaches the decision, and schedulingTimeoutSeconds ends the wait.
TEST(JobDecision, UnschedulablePodsAreNamedAndFailTheJobAfterTheSchedulingTimeout) {
  api::TrainingJob job = MakeJob(api::RestartPolicy::kOnFailure);
  job.run_policy.scheduling_timeout_seconds = 60;
  const std::string why = "0/1 nodes are available: 1 Insufficient cpu.";
  struct Row {
    absl::Duration since_start;
    bool ever_ran;
    bool fails;
  };
  for (const Row& row : {Row{absl::Seconds(10), false, false}, Row{absl::Seconds(60), false, true},
                         Row{absl::Seconds(600), true, false}}) {
    JobObservation o = AllRunning(job, row.since_start);
    PodState pending = Pod(PodPhase::kPending);
    pending.unschedulable = why;
    At(o, ReplicaType::kWorker, 1).pod = pending;
    JobStatus status;
    if (row.ever_ran) {
      status.SetCondition(ConditionType::kRestarting, true, "ReplicaRestarting", "", kStart);
    }
    const Decision d = Decide(job, "default/j", status, o);
    ASSERT_EQ(d.unschedulable.size(), 1u);
    if (row.fails) {
      ASSERT_TRUE(d.failure.has_value());
      EXPECT_EQ(d.failure->first, "Unschedulable");
      EXPECT_EQ(d.failure->second,
                "not every replica was running within schedulingTimeoutSeconds=60; Worker 1 (pod "
                "j-worker-1): " +
                    why);
      continue;
    }
    EXPECT_FALSE(d.failure.has_value());
    EXPECT_EQ(d.unschedulable[0].first, (ReplicaSlot{ReplicaType::kWorker, 1}));
    EXPECT_EQ(d.unschedulable[0].second, "Worker 1 (pod j-worker-1): " + why);
    if (!row.ever_ran) {
      EXPECT_EQ(d.requeue_after, absl::Seconds(50));
    }
  }
}

TEST(JobDecision, ASchedulingTimeoutWithoutAnUnschedulablePodNamesTheFirstNotRunning) {
  api::TrainingJob job = MakeJob(api::RestartPolicy::kOnFailure);
  job.run_policy.scheduling_timeout_seconds = 5;
  JobObservation o = AllRunning(job, absl::Seconds(5));
  At(o, ReplicaType::kWorker, 0).pod = Pod(PodPhase::kPending);  // pulling its image, say
  const Decision d = Decide(job, "default/j", {}, o);
  ASSERT_TRUE(d.failure.has_value());
  EXPECT_EQ(d.failure->second,
            "not every replica was running within schedulingTimeoutSeconds=5; Worker 0 (pod "
            "j-worker-0) is still Pending");
}

// Issue 31: a job whose pods a queue holds back by their scheduling gates (Kueue's admission gate)
// is queued, not late: neither activeDeadlineSeconds nor schedulingTimeoutSeconds runs while every
// pod is gated, and both count from the later of the job's start and its latest admission.
TEST(JobDecision, QueuedPodsStopTheClocksWhichCountFromTheAdmission) {
  api::TrainingJob job = MakeJob(api::RestartPolicy::kOnFailure);
  job.run_policy.active_deadline_seconds = 100;
  job.run_policy.scheduling_timeout_seconds = 60;
  enum Gated { kNone, kOne, kAll };
  struct Row {
    const char* what;
    Gated gated;
    absl::Duration since_start;
    std::optional<absl::Duration> admitted_after_start;
    std::string failure;  // reason, "" for none
    std::optional<absl::Duration> requeue_after;
  };
  const Row rows[] = {
      {"queued past both limits", kAll, absl::Seconds(1000), std::nullopt, "", std::nullopt},
      {"one gated pod beside running ones is not queued: the deadline counts from the start", kOne,
       absl::Seconds(100), std::nullopt, "DeadlineExceeded", std::nullopt},
      {"never queued, past the timeout", kNone, absl::Seconds(60), std::nullopt, "Unschedulable",
       std::nullopt},
      {"admitted 30 s ago", kNone, absl::Seconds(1000), absl::Seconds(970), "", absl::Seconds(30)},
      {"admitted 60 s ago", kNone, absl::Seconds(1000), absl::Seconds(940), "Unschedulable",
       std::nullopt},
      {"admitted before the start: the start counts", kNone, absl::Seconds(60), -absl::Seconds(50),
       "Unschedulable", std::nullopt},
  };
  for (const Row& row : rows) {
    JobObservation o = AllRunning(job, row.since_start);
    if (row.admitted_after_start) o.admitted = kStart + *row.admitted_after_start;
    PodState gated = Pod(PodPhase::kPending);
    gated.scheduling_gates = {"kueue.x-k8s.io/admission", "example.com/other"};
    At(o, ReplicaType::kWorker, 1).pod = row.gated == kNone ? Pod(PodPhase::kPending) : gated;
    if (row.gated == kAll) {
      for (SlotObservation& s : o.slots) s.pod = gated;
    }
    const Decision d = Decide(job, "default/j", {}, o);
    EXPECT_EQ(d.failure ? d.failure->first : "", row.failure) << row.what;
    if (!row.failure.empty()) continue;
    EXPECT_EQ(d.requeue_after, row.requeue_after) << row.what;
    if (row.gated == kAll) {
      ASSERT_EQ(d.queued.size(), 3u) << row.what;
      EXPECT_EQ(d.queued[2].first, (ReplicaSlot{ReplicaType::kWorker, 1}));
      EXPECT_EQ(d.queued[2].second,
                "Worker 1 (pod j-worker-1) waits for its scheduling gates to go: "
                "kueue.x-k8s.io/admission, example.com/other");
    } else {
      EXPECT_TRUE(d.queued.empty()) << row.what;
    }
  }
  // The deadline, too, counts from the admission.
  JobObservation o = AllRunning(job, absl::Seconds(1000));
  o.admitted = kStart + absl::Seconds(901);
  EXPECT_FALSE(Decide(job, "default/j", {}, o).failure);
  o.admitted = kStart + absl::Seconds(900);
  const Decision d = Decide(job, "default/j", {}, o);
  ASSERT_TRUE(d.failure);
  EXPECT_EQ(d.failure->first, "DeadlineExceeded");
}

// Issue 31: "when suspend is in use" (the job was suspended before: whoever queues it admits it by
// resuming it), the scheduling timeout suspends the job rather than failing it.
TEST(JobDecision, ASchedulingTimeoutSuspendsAJobSuspendedBeforeInsteadOfFailingIt) {
  api::TrainingJob job = MakeJob(api::RestartPolicy::kOnFailure);
  job.run_policy.scheduling_timeout_seconds = 60;
  JobObservation o = AllRunning(job, absl::Seconds(60));
  PodState pending = Pod(PodPhase::kPending);
  pending.unschedulable = "0/1 nodes are available: 1 Insufficient cpu.";
  At(o, ReplicaType::kWorker, 0).pod = pending;
  JobStatus resumed;
  resumed.SetCondition(ConditionType::kSuspended, true, "Suspended", "", kStart);
  resumed.SetCondition(ConditionType::kSuspended, false, "Resumed", "", kStart);
  const Decision d = Decide(job, "default/j", resumed, o);
  EXPECT_FALSE(d.failure);
  ASSERT_TRUE(d.suspend);
  EXPECT_EQ(d.suspend->first, "SchedulingTimeout");
  EXPECT_EQ(d.suspend->second,
            "not every replica was running within schedulingTimeoutSeconds=60; Worker 0 (pod "
            "j-worker-0): 0/1 nodes are available: 1 Insufficient cpu.");
  // A job never suspended fails.
  const Decision never = Decide(job, "default/j", {}, o);
  EXPECT_FALSE(never.suspend);
  ASSERT_TRUE(never.failure);
  EXPECT_EQ(never.failure->first, "Unschedulable");
}

TEST(JobDecision, AFailedEvaluatorIsReportedOnceAndNeverDecides) {
  const api::TrainingJob job = MakeJob(api::RestartPolicy::kNever, 2, 1);
  JobObservation o = AllRunning(job);
  At(o, ReplicaType::kEvaluator, 0).pod = Pod(PodPhase::kFailed, 1, "Error");
  Decision d = Decide(job, "default/j", {}, o);
  EXPECT_FALSE(d.failure);
  ASSERT_EQ(d.left_ended.size(), 1u);
  EXPECT_TRUE(d.restarts.empty());
  // Once the status names it, it is not reported again.
  JobStatus status;
  status.replica_statuses[ReplicaType::kEvaluator].indexes[0].last_failure =
      ReplicaFailure{"Error", 1, "", "j-evaluator-0", ""};
  d = Decide(job, "default/j", status, o);
  EXPECT_TRUE(d.left_ended.empty());
  EXPECT_TRUE(d.ended_badly.empty());
  EXPECT_FALSE(d.failure);
}

TEST(JobDecision, BackoffCountsReplacementsInPlaceRestartsAndTheseButNotEvaluators) {
  api::TrainingJob job = MakeJob(api::RestartPolicy::kOnFailure, 2, 1);
  job.run_policy.backoff_limit = 3;
  JobStatus status;
  status.replica_statuses[ReplicaType::kWorker].indexes[1].replaced_restarts = 1;
  status.replica_statuses[ReplicaType::kEvaluator].indexes[0].replaced_restarts = 50;
  JobObservation o = AllRunning(job);
  At(o, ReplicaType::kWorker, 0).pod = Pod(PodPhase::kRunning, 137, "OOMKilled", 2);
  At(o, ReplicaType::kEvaluator, 0).pod = Pod(PodPhase::kRunning, 1, "Error", 9);
  Decision d = Decide(job, "default/j", status, o);
  EXPECT_EQ(d.counted_restarts, 3);
  EXPECT_FALSE(d.failure);  // 3 restarts are allowed
  At(o, ReplicaType::kWorker, 1).pod = Pod(PodPhase::kFailed, 2, "Error");
  d = Decide(job, "default/j", status, o);
  EXPECT_EQ(d.counted_restarts, 4);
  ASSERT_TRUE(d.failure);
  EXPECT_EQ(d.failure->first, "BackoffLimitExceeded");
  EXPECT_EQ(d.failure->second,
            "restart 4 of the job's replicas exceeds backoffLimit 3; last: Worker 1 (pod "
            "j-worker-1) failed: exit code 2 (Error)");
}

// A failed pod whose replacement the status already counts (its uid recorded: its delete failed
// after the count was written) is deleted again and counted nowhere: not as a restart, not as a
// failure, not in the backoff, not its in-place restarts (folded in with the count). Another pod
// of that index (a different uid) is judged afresh.
TEST(JobDecision, APodWhoseReplacementIsCountedIsDeletedAgainAndCountedNowhere) {
  api::TrainingJob job = MakeJob(api::RestartPolicy::kOnFailure);
  job.run_policy.backoff_limit = 2;
  JobStatus status;
  IndexStatus& counted = status.replica_statuses[ReplicaType::kWorker].indexes[1];
  counted.replaced_restarts = 2;  // the replacement and one in-place restart of that pod
  counted.replaced_pod_uid = "uid-1";
  JobObservation o = AllRunning(job);
  SlotObservation& failed = At(o, ReplicaType::kWorker, 1);
  failed.pod = Pod(PodPhase::kFailed, 2, "Error", 1);
  failed.pod_uid = "uid-1";
  Decision d = Decide(job, "default/j", status, o);
  ASSERT_EQ(d.replacing.size(), 1u);
  EXPECT_EQ(d.replacing[0].slot, (ReplicaSlot{ReplicaType::kWorker, 1}));
  EXPECT_TRUE(d.restarts.empty());
  EXPECT_TRUE(d.ended_badly.empty());
  EXPECT_EQ(d.counted_restarts, 2);
  EXPECT_FALSE(d.failure);
  EXPECT_FALSE(d.all_running);

  failed.pod_uid = "uid-2";  // the pod that replaced it, failed too
  failed.pod = Pod(PodPhase::kFailed, 2, "Error");
  d = Decide(job, "default/j", status, o);
  EXPECT_TRUE(d.replacing.empty());
  ASSERT_EQ(d.restarts.size(), 1u);
  EXPECT_EQ(d.ended_badly.size(), 1u);
  EXPECT_EQ(d.counted_restarts, 3);
  ASSERT_TRUE(d.failure);
  EXPECT_EQ(d.failure->first, "BackoffLimitExceeded");
}

// A pod whose status is an earlier pod's of its name (PodState::stale_status) is deleted and
// made again, counted nowhere, under any restart policy.
TEST(JobDecision, APodWithAnEarlierPodsStatusIsMadeAgainCountedNowhere) {
  for (api::RestartPolicy policy : {api::RestartPolicy::kNever, api::RestartPolicy::kOnFailure,
                                    api::RestartPolicy::kAlways, api::RestartPolicy::kExitCode}) {
    api::TrainingJob job = MakeJob(policy);
    JobObservation o = AllRunning(job);
    PodState stale;
    stale.phase = PodPhase::kPending;
    stale.stale_status = "its status is an earlier pod's";
    At(o, ReplicaType::kPS, 0).pod = stale;
    At(o, ReplicaType::kWorker, 0).pod = stale;
    const Decision d = Decide(job, "default/j", JobStatus(), o);
    ASSERT_EQ(d.replacing.size(), 2u);
    EXPECT_EQ(d.replacing[0].slot, (ReplicaSlot{ReplicaType::kPS, 0}));
    EXPECT_EQ(d.replacing[1].slot, (ReplicaSlot{ReplicaType::kWorker, 0}));
    EXPECT_TRUE(d.restarts.empty());
    EXPECT_TRUE(d.ended_badly.empty());
    EXPECT_TRUE(d.completed.empty());
    EXPECT_EQ(d.counted_restarts, 0);
    EXPECT_FALSE(d.failure);
    EXPECT_FALSE(d.success);
    EXPECT_FALSE(d.all_running);
  }
}

// Issue 31: a pod Kubernetes disrupted (DisruptionTarget True: preempted, evicted, its node
// lost) is run again without using the backoff budget, even with none left and under Never; a
// podFailurePolicy rule decides before restartPolicy, and a FailJob names the rule.
TEST(JobDecision, DisruptionsRestartUncountedAndFailureRulesDecideBeforeTheRestartPolicy) {
  api::TrainingJob job = MakeJob(api::RestartPolicy::kNever);
  job.run_policy.backoff_limit = 0;
  JobObservation o = AllRunning(job);
  PodState preempted = Pod(PodPhase::kFailed, std::nullopt, "Preempted");
  preempted.conditions = {{"DisruptionTarget", "True"}};
  At(o, ReplicaType::kWorker, 1).pod = preempted;
  Decision d = Decide(job, "default/j", {}, o);
  EXPECT_FALSE(d.failure);
  ASSERT_EQ(d.restarts.size(), 1u);
  EXPECT_FALSE(d.restarts[0].counted);
  EXPECT_EQ(d.restarts[0].why, "a disruption (DisruptionTarget): not counted against backoffLimit");
  EXPECT_EQ(d.counted_restarts, 0);

  // An application failure beside it: Never fails the job, as before.
  At(o, ReplicaType::kWorker, 0).pod = Pod(PodPhase::kFailed, 1, "Error");
  d = Decide(job, "default/j", {}, o);
  ASSERT_TRUE(d.failure);
  EXPECT_EQ(d.failure->second,
            "Worker 0 (pod j-worker-0) failed: exit code 1 (Error); restartPolicy Never does not "
            "restart it");

  // Rules: exit 1 is counted and restarted even under Never; exit 3 fails the job by name.
  api::FailureRule fail_on_3;
  fail_on_3.action = api::FailureAction::kFailJob;
  fail_on_3.on_exit_codes = api::ExitCodeRequirement{true, {3}};
  api::FailureRule count_1;
  count_1.action = api::FailureAction::kCount;
  count_1.on_exit_codes = api::ExitCodeRequirement{true, {1}};
  job.replica_specs[ReplicaType::kWorker].failure_rules = {fail_on_3, count_1};
  job.run_policy.backoff_limit = 1;
  d = Decide(job, "default/j", {}, o);
  EXPECT_FALSE(d.failure);
  ASSERT_EQ(d.restarts.size(), 2u);
  EXPECT_TRUE(d.restarts[0].counted);
  EXPECT_EQ(d.restarts[0].why, "podFailurePolicy rule 2 (Count on exit codes In [1])");
  EXPECT_EQ(d.counted_restarts, 1);
  At(o, ReplicaType::kWorker, 0).pod = Pod(PodPhase::kFailed, 3, "Error");
  d = Decide(job, "default/j", {}, o);
  ASSERT_TRUE(d.failure);
  EXPECT_EQ(d.failure->first, "ReplicaFailed");
  EXPECT_EQ(d.failure->second,
            "Worker 0 (pod j-worker-0) failed: exit code 3 (Error); podFailurePolicy rule 1 "
            "(FailJob on exit codes In [3]) fails the job");
}

TEST(JobDecision, TheDefaultBackoffLimitIsSix) {
  const api::TrainingJob job = MakeJob(api::RestartPolicy::kOnFailure);
  JobObservation o = AllRunning(job);
  At(o, ReplicaType::kWorker, 0).pod = Pod(PodPhase::kRunning, 1, "Error", 6);
  EXPECT_FALSE(Decide(job, "default/j", {}, o).failure);
  At(o, ReplicaType::kWorker, 0).pod = Pod(PodPhase::kRunning, 1, "Error", 7);
  const Decision d = Decide(job, "default/j", {}, o);
  ASSERT_TRUE(d.failure);
  EXPECT_EQ(d.failure->second,
            "restart 7 of the job's replicas exceeds backoffLimit 6; last: Worker 0 (pod "
            "j-worker-0) was restarted in place after exit code 1 (Error)");
}

TEST(JobDecision, TheDeadlineFailsTheJobAndOtherwiseBringsItBack) {
  api::TrainingJob job = MakeJob(api::RestartPolicy::kNever);
  job.run_policy.active_deadline_seconds = 60;
  Decision d = Decide(job, "ns/j", {}, AllRunning(job, absl::Seconds(45)));
  EXPECT_FALSE(d.failure);
  EXPECT_EQ(d.requeue_after, absl::Seconds(15));
  d = Decide(job, "ns/j", {}, AllRunning(job, absl::Seconds(60)));
  ASSERT_TRUE(d.failure);
  EXPECT_EQ(d.failure->first, "DeadlineExceeded");
  EXPECT_EQ(d.failure->second, "TrainingJob ns/j ran longer than activeDeadlineSeconds=60");
}

TEST(JobDecision, AnEvictedWorkerIsRestartedUnderExitCode) {
  const api::TrainingJob job = MakeJob(api::RestartPolicy::kExitCode);
  JobObservation o = AllRunning(job);
  At(o, ReplicaType::kWorker, 1).pod = Pod(PodPhase::kFailed, std::nullopt, "Evicted");
  At(o, ReplicaType::kWorker, 0).pod = Pod(PodPhase::kFailed, 3, "Error");
  const Decision d = Decide(job, "default/j", {}, o);
  ASSERT_EQ(d.restarts.size(), 1u);
  EXPECT_EQ(d.restarts[0].slot, (ReplicaSlot{ReplicaType::kWorker, 1}));
  ASSERT_TRUE(d.failure);  // worker 0's exit code 3 is its own verdict
  EXPECT_EQ(d.failure->first, "ReplicaFailed");
  EXPECT_EQ(d.ended_badly.size(), 2u);
}

}  // namespace
}  // namespace psflow::controller
