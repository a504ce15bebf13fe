// The synchronous step rules of one ps task (TensorFlow's SyncReplicasOptimizer rules, applied
// per partition), as a pure state machine (step_rules.h).
//
// The first `replicas_to_aggregate` workers to push for the current step s are admitted (per
// worker, on its first chunk); their gradients are staged by the caller, who then says so
// (Staged). A worker has delivered a partition when it has sent all of its elements (dense:
// counted against the partition's size) or all of its push's chunks (sparse rows vary per
// worker: the whole push marks them delivered). Once the admitted set is final (the step's
// contributions, below, are in) and every admitted worker has delivered
// a partition, that partition is handed out (Progress::apply) to be averaged over the admitted
// workers and applied at once, without waiting for the others. When every partition is applied
// (Applied) and every admitted worker's chunks are in, the step becomes s + 1: the one Applied
// call that completes it returns true. Partitions that become ready together are handed out in
// partition order (the order the next forward pass reads them).
//
// A push computed at a step older than s is dropped as stale, and changes nothing else (a late
// chunk is no sign that its worker is back); a push for s from a worker beyond the first
// replicas_to_aggregate (a backup worker), or once a partition of s was handed out, is dropped
// too, so the slowest never hold the step back.
//
// Which workers count (worker_membership.h): those the constructor is given (workers
// 0 .. total_workers - 1 at a job's start); a worker that is
// not counted (added by a scale-up, or back after leaving) joins with its first push of the
// current step. Between steps (no push of s admitted yet) it joins as that push is admitted;
// otherwise the push is dropped (kDropJoining) and the worker counts from s + 1 on, so the
// number of contributions a step waits for changes only at a step boundary. A worker that Leaves
// no longer counts: if its push of s was incomplete it loses its place in the step and none of
// its staged pieces is applied (Progress::given_up: the caller discards them); if it was
// complete, s still waits for the others (a leave takes effect after the step it pushed to), so
// a worker that finishes first never makes the last step complete without the slower ones. A
// step needs min(replicas_to_aggregate, workers counted) contributions; replicas_to_aggregate 0:
// every counted worker's. With complete pushes every partition gets exactly the sum the
// whole-step rule gave.
//
// A push left incomplete for the push timeout (a worker killed mid-push: no Leave, the rest never
// comes) is given up by Expire: the worker loses its place as with Leave, and until it pushes again
// it does not count among the workers still in the job, so the step completes with the others.
// Its chunks of that step that come later (late ones, or its restarted self pushing the step
// again) are kDropGivenUp: the given-up push stands for the step, and admitting them could open a
// push whose earlier chunks never come again. It counts again from its push of the next step.
// Partitions of the step already applied keep its pieces (they were whole); the others never see
// them. If every
// admitted worker of a partly applied step is gone, the step's remaining partitions are handed out
// with no workers (no update) and the step completes; so does a step whose every admitted push is
// gone while no other worker counts.
//
// A worker that restarts mid-step (killed, its pod re-created) pulls step s and pushes it again:
// a chunk its admitted push of s already has, or one of another chunk count, is kDropRepeated and
// changes nothing; the first push stands (complete, or given up by Expire), and a chunk of it not
// seen before completes it. (Its next pull waits for s + 1 as any worker's does.)
//
// The caller's protocol per chunk: Admit -> (kAccumulate) stage the payload -> Staged -> discard
// the staged pieces of Progress::given_up, apply Progress::apply -> Applied (always, even with
// nothing to apply). Leave and Expire return a Progress the same way. Not thread-safe
// (StepCoordinator holds it under its lock).
#ifndef PSFLOW_PS_SYNC_STEP_RULES_H_
#define PSFLOW_PS_SYNC_STEP_RULES_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "ps/step_rules.h"
#include "ps/worker_membership.h"

namespace psflow {

class SyncStepRules {
 public:
  // Ready at `step` (>= 0) with `sync`'s rules (StepCoordinator::CheckSyncConfig holds);
  // partition_elements: the size of each partition, in the order segments index them (none: the
  // step is only whole pushes; segments naming a partition outside the list count as sparse).
  // counted: the workers counted from the start (at a job's start workers 0 .. total_workers - 1;
  // a task restored from a checkpoint, those its checkpoint counted).
  SyncStepRules(const proto::SyncConfig& sync, int64_t step,
                std::vector<int64_t> partition_elements, WorkerMembership counted);

  int64_t step() const { return step_; }
  // Partition p of the current step is applied (its values are those of step() + 1).
  bool applied(uint32_t p) const;
  // Some partitions of the current step are handed out and the step has not completed: a
  // checkpoint now would see half a step.
  bool mid_step() const { return closed_; }
  int workers_in_step() const { return static_cast<int>(admitted_.size()); }
  // Workers counted now (members, less those whose push was given up and have not pushed since).
  int workers() const { return membership_.members() - absent_count_; }
  // Which: the members whose push was not given up (what a checkpoint keeps), ascending.
  std::vector<int> counted_workers() const;
  // The contributions the current step waits for.
  int contributions_needed() const;
  // Who joined or left since the last call (for the log and metrics).
  std::vector<MembershipChange> TakeMembershipChanges() { return membership_.TakeChanges(); }

  // The verdict on one chunk. INVALID_ARGUMENT for what CheckPushHeader refuses, a chunk sent
  // twice or with another count by an admitted worker, or dense elements of a partition sent
  // twice; nothing changes then.
  absl::StatusOr<step_rules::Admission> Admit(const proto::TransferHeader& header,
                                              step_rules::Clock::time_point now);
  // The admitted chunk's gradients are staged: what became ready (nothing for a worker not
  // admitted).
  step_rules::Progress Staged(const proto::TransferHeader& header);
  // progress.apply was applied: true when this call completed the step (then step() moved on).
  bool Applied(const step_rules::Progress& progress);
  // The worker has finished or stopped (later calls return nothing until it pushes again).
  step_rules::Progress Leave(int worker);
  // Gives up every admitted push still incomplete `timeout` after its first chunk.
  step_rules::Progress Expire(step_rules::Clock::time_point now,
                              step_rules::Clock::duration timeout);
  // When the oldest incomplete push passes `timeout`; max() when none is incomplete.
  step_rules::Clock::time_point NextPushDeadline(step_rules::Clock::duration timeout) const;

 private:
  // One admitted worker's push to this task in the current step.
  struct WorkerPush {
    uint32_t num_chunks = 0;
    uint32_t chunks_in = 0;  // staged
    std::vector<bool> seen;  // per chunk: admitted
    // Per partition: dense elements admitted, dense elements staged, delivered.
    std::vector<int64_t> admitted_elements;
    std::vector<int64_t> staged_elements;
    std::vector<bool> delivered;
    step_rules::Clock::time_point opened;  // its first chunk's admission
    bool complete() const { return chunks_in == num_chunks; }
  };
  enum class PartitionState : uint8_t { kWaiting, kApplying, kApplied };

  bool AdmissionFinal() const;
  void GrowTo(int worker);  // per-worker tables cover `worker`
  // Adds the partitions every admitted worker has delivered, marked kApplying, to progress.
  void TakeReady(step_rules::Progress& progress);

  const int required_;  // replicas_to_aggregate; 0: every counted worker
  const std::vector<int64_t> partition_elements_;
  int64_t step_;
  std::map<int, WorkerPush> admitted_;           // the current step's
  std::vector<PartitionState> partition_state_;  // per partition, in the current step
  // A partition of the current step was handed out, or the step's completion was told:
  // admission is closed.
  bool closed_ = false;
  bool completion_told_ = false;  // Progress::completes_step given for this step
  bool step_started_ = false;     // a push of the current step was admitted
  WorkerMembership membership_;
  // Per worker: a member whose push was given up and who has not pushed since.
  std::vector<bool> absent_;
  int absent_count_ = 0;
  std::vector<int64_t> given_up_step_;  // per worker: the step of its push Expire gave up, or -1
};

}  // namespace psflow

#endif  // PSFLOW_PS_SYNC_STEP_RULES_H_
