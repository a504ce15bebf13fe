#include "operator/controller/job_decision.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "operator/api/job_policy.h"

namespace psflow::controller {

using api::ReplicaType;

std::string ReplicaLabel(ReplicaType type, int index) {
  return absl::StrCat(api::ReplicaTypeName(type), " ", index);
}

std::string ReplicaPodLabel(ReplicaType type, int index, const std::string& pod) {
  return absl::StrCat(ReplicaLabel(type, index), " (pod ", pod, ")");
}

namespace {

std::string Named(const SlotObservation& s) { return ReplicaPodLabel(s.type, s.index, s.pod_name); }

// How a pod that reached Succeeded or Failed ended, for the policy. A Failed pod whose container
// says 0 (or nothing) ended for a reason outside the program: no exit code.
api::ReplicaExit ExitOf(const PodState& state) {
  if (state.phase == PodPhase::kSucceeded) return {state.exit_code.value_or(0), state.conditions};
  if (state.exit_code && *state.exit_code != 0) return {state.exit_code, state.conditions};
  return {std::nullopt, state.conditions};
}

bool Completed(const JobStatus& status, ReplicaType type, int index) {
  auto it = status.replica_statuses.find(type);
  return it != status.replica_statuses.end() && it->second.completed_indexes.count(index) > 0;
}

// Whether the index's lastFailure already names this pod (pods are replaced under the same name,
// but a pod left ended is not replaced).
bool AlreadyReported(const JobStatus& status, const SlotObservation& s) {
  auto rs = status.replica_statuses.find(s.type);
  if (rs == status.replica_statuses.end()) return false;
  auto is = rs->second.indexes.find(s.index);
  if (is == rs->second.indexes.end() || !is->second.last_failure) return false;
  const ReplicaFailure& f = *is->second.last_failure;
  return f.pod == s.pod_name && f.exit_code == s.pod->exit_code &&
         (s.pod->reason.empty() || f.reason == s.pod->reason);
}

// Whether the status already counts the replacement of this slot's pod (its delete is pending).
bool BeingReplaced(const JobStatus& status, const SlotObservation& s) {
  if (s.pod_uid.empty()) return false;
  auto rs = status.replica_statuses.find(s.type);
  if (rs == status.replica_statuses.end()) return false;
  auto is = rs->second.indexes.find(s.index);
  return is != rs->second.indexes.end() && is->second.replaced_pod_uid == s.pod_uid;
}

}  // namespace

Decision Decide(const api::TrainingJob& job, const std::string& job_key, const JobStatus& status,
                const JobObservation& observed) {
  Decision d;
  for (const SlotObservation& s : observed.slots) {
    if (!s.pod || s.pod->being_deleted || !s.pod->Active() || Completed(status, s.type, s.index)) {
      continue;
    }
    if (s.pod->scheduling_gates.empty()) {
      d.pod_ungated = true;
      continue;
    }
    d.queued.push_back({{s.type, s.index},
                        absl::StrCat(Named(s), " waits for its scheduling gates to go: ",
                                     absl::StrJoin(s.pod->scheduling_gates, ", "))});
  }
  if (d.pod_ungated) d.queued.clear();  // the job is not waiting as a whole
  // The job's clocks run from its start, or from its latest admission by a queue.
  const absl::Time clock_start = std::max(observed.start, observed.admitted);
  if (std::optional<absl::Duration> deadline = api::ActiveDeadline(job);
      d.queued.empty() && deadline) {
    const absl::Time end = clock_start + *deadline;
    if (observed.now >= end) {
      d.failure = {"DeadlineExceeded",
                   absl::StrCat("TrainingJob ", job_key, " ran longer than activeDeadlineSeconds=",
                                *job.run_policy.active_deadline_seconds)};
      return d;
    }
    d.requeue_after = end - observed.now;
  }

  d.create_service = !observed.has_service;
  d.all_running = true;
  int live_restarts = 0;  // the kubelet's, of pods still there, as the backoff limit counts them
  std::optional<std::string> last_in_place;
  for (const SlotObservation& s : observed.slots) {
    if (Completed(status, s.type, s.index)) continue;
    if (!s.pod) {
      d.create_pods.push_back({s.type, s.index});
      d.all_running = false;
      continue;
    }
    const PodState& state = *s.pod;
    if (!state.unschedulable.empty() && !state.being_deleted) {
      d.unschedulable.push_back(
          {{s.type, s.index},
           absl::StrCat(ReplicaPodLabel(s.type, s.index, s.pod_name), ": ", state.unschedulable)});
    }
    if (state.being_deleted) {
      d.all_running = false;
      continue;
    }
    if (BeingReplaced(status, s) || !state.stale_status.empty()) {
      d.all_running = false;
      d.replacing.push_back({{s.type, s.index}, state, s.pod_name});
      continue;
    }
    if (state.restarts > 0 && api::CountsAgainstBackoff(s.type)) {
      live_restarts += state.restarts;
      if (!last_in_place) {
        last_in_place =
            absl::StrCat(Named(s), " was restarted in place after ", state.DescribeEnd());
      }
    }
    if (state.phase == PodPhase::kRunning) continue;
    if (state.phase != PodPhase::kSucceeded && state.phase != PodPhase::kFailed) {
      d.all_running = false;
      continue;
    }
    const api::ReplicaExit exit = ExitOf(state);
    const api::ReplicaOutcome outcome = api::OnReplicaEnd(job, s.type, exit);
    switch (outcome) {
      case api::ReplicaOutcome::kCompleted:
        d.completed.push_back({s.type, s.index});
        break;
      case api::ReplicaOutcome::kRestart:
      case api::ReplicaOutcome::kRestartUncounted: {
        d.all_running = false;
        d.ended_badly.push_back({{s.type, s.index}, state, s.pod_name});
        EndedPod& restart = d.restarts.emplace_back(EndedPod{{s.type, s.index}, state, s.pod_name});
        restart.counted = outcome == api::ReplicaOutcome::kRestart;
        restart.why = api::FailureRuleReason(job, s.type, exit);
        break;
      }
      case api::ReplicaOutcome::kFailJob:
        d.all_running = false;
        d.ended_badly.push_back({{s.type, s.index}, state, s.pod_name});
        if (!d.failure) {
          const std::string policy(
              api::RestartPolicyName(job.replica_specs.at(s.type).restart_policy));
          const std::string rule = api::FailureRuleReason(job, s.type, exit);
          d.failure = {"ReplicaFailed",
                       !rule.empty() ? absl::StrCat(Named(s), " failed: ", state.DescribeEnd(),
                                                    "; ", rule, " fails the job")
                       : s.type == ReplicaType::kPS && exit.ok()
                           ? absl::StrCat(Named(s),
                                          " exited before the job finished (exit code "
                                          "0); restartPolicy ",
                                          policy, " does not restart it")
                           : absl::StrCat(Named(s), " failed: ", state.DescribeEnd(),
                                          "; restartPolicy ", policy, " does not restart it")};
        }
        break;
      case api::ReplicaOutcome::kLeftEnded:
        // An evaluator that failed for good: the job goes on, every other slot decides. Its
        // pod stays; it is reported once (its lastFailure names it from then on).
        if (!AlreadyReported(status, s)) {
          d.ended_badly.push_back({{s.type, s.index}, state, s.pod_name});
          d.left_ended.push_back({{s.type, s.index}, state, s.pod_name});
        }
        break;
    }
  }

  // backoffLimit counts every restart: replacements so far, the kubelet's, and these.
  int counted = live_restarts;
  for (const auto& [type, rs] : status.replica_statuses) {
    if (api::CountsAgainstBackoff(type)) counted += rs.ReplacedRestarts();
  }
  for (const EndedPod& r : d.restarts) {
    if (r.counted && api::CountsAgainstBackoff(r.slot.first)) ++counted;
  }
  d.counted_restarts = counted;
  const int limit = api::BackoffLimit(job);
  if (!d.failure && counted > limit) {
    std::string last;
    for (const EndedPod& r : d.restarts) {
      if (!r.counted || !api::CountsAgainstBackoff(r.slot.first)) continue;
      last = absl::StrCat(r.Label(), " failed: ", r.state.DescribeEnd());
      break;
    }
    if (last.empty() && last_in_place) last = *last_in_place;
    d.failure = {"BackoffLimitExceeded",
                 absl::StrCat("restart ", counted, " of the job's replicas exceeds backoffLimit ",
                              limit, last.empty() ? "" : "; last: ", last)};
  }
  if (d.failure) return d;

  // A job that never had every replica running, past its scheduling timeout, fails with the
  // scheduler's word for why (or the first replica not running).
  const bool ever_ran = status.Find(ConditionType::kRunning) != nullptr ||
                        status.Find(ConditionType::kRestarting) != nullptr;
  if (std::optional<absl::Duration> timeout = api::SchedulingTimeout(job);
      timeout && !ever_ran && !d.all_running && d.queued.empty()) {
    const absl::Time end = clock_start + *timeout;
    if (observed.now >= end) {
      std::string why;
      if (!d.unschedulable.empty()) {
        why = d.unschedulable.front().second;
      } else {
        for (const SlotObservation& s : observed.slots) {
          if (Completed(status, s.type, s.index)) continue;
          if (!s.pod || s.pod->phase != PodPhase::kRunning) {
            why = absl::StrCat(s.pod ? ReplicaPodLabel(s.type, s.index, s.pod_name)
                                     : ReplicaLabel(s.type, s.index),
                               s.pod ? " is still Pending" : " has no pod yet");
            break;
          }
        }
      }
      std::string message =
          absl::StrCat("not every replica was running within schedulingTimeoutSeconds=",
                       *job.run_policy.scheduling_timeout_seconds, why.empty() ? "" : "; ", why);
      // Suspend is in use once the job has been suspended: it is suspended again, not failed.
      if (status.Find(ConditionType::kSuspended) != nullptr) {
        d.suspend = {"SchedulingTimeout", std::move(message)};
      } else {
        d.failure = {"Unschedulable", std::move(message)};
      }
      return d;
    }
    d.requeue_after =
        d.requeue_after ? std::min(*d.requeue_after, end - observed.now) : end - observed.now;
  }

  const bool succeeded = api::JobSucceeded(job, [&](ReplicaType type, int index) {
    return Completed(status, type, index) ||
           absl::c_linear_search(d.completed, ReplicaSlot{type, index});
  });
  if (succeeded) d.success = api::SuccessReason(job);
  return d;
}

}  // namespace psflow::controller
