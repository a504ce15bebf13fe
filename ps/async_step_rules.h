// The asynchronous step rules of one ps task, as a pure state machine (step_rules.h): every
// gradient chunk is applied as it arrives. A push is one worker's chunks for one step (same step
// and chunk count, no chunk twice); its first chunk to arrive, whichever it is, opens it: the step
// advances by one and the push is counted at the step it found (Admission::step: every chunk of
// the push is applied as optimizer step Admission::step + 1, so a push split into chunks updates
// exactly as the push whole) with its staleness (that step minus the step the gradient was
// computed at). A chunk that cannot belong to the worker's open push (another step or count, or
// a chunk already seen: the worker restarted) opens a new one; the old one ends as it is. A push
// ends early when its worker Leaves or when it stays incomplete for the push timeout (Expire):
// Progress::given_up names it, and its chunks applied so far stay applied. Its chunks that come
// later (same step and count, a chunk not seen before) are kDropGivenUp: opening a push with them
// would move the step for a push that can never complete (and hold a checkpoint waiting for it),
// and count a worker that left. Workers
// (worker_membership.h): 0 .. total_workers - 1 count from the start; any other (a scale-up, or
// one back after leaving) joins with its first chunk, at once.
// Not thread-safe (StepCoordinator holds it under its lock).
#ifndef PSFLOW_PS_ASYNC_STEP_RULES_H_
#define PSFLOW_PS_ASYNC_STEP_RULES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ps/step_rules.h"
#include "ps/worker_membership.h"

namespace psflow {

class AsyncStepRules {
 public:
  // Ready at `step` (>= 0), `counted` counted from the start (at a job's start workers
  // 0 .. total_workers - 1; a task restored from a checkpoint, those its checkpoint counted).
  AsyncStepRules(WorkerMembership counted, int64_t step);

  int64_t step() const { return step_; }
  int workers() const { return membership_.members(); }
  std::vector<int> counted_workers() const { return membership_.Members(); }
  // Who joined or left since the last call (for the log and metrics).
  std::vector<MembershipChange> TakeMembershipChanges() { return membership_.TakeChanges(); }

  // The verdict on one chunk (always kApply once the header passes CheckPushHeader, whose errors
  // it returns); a chunk that opens a push advances the step.
  absl::StatusOr<step_rules::Admission> Admit(const proto::TransferHeader& header,
                                              step_rules::Clock::time_point now);
  // The worker has finished or stopped: its open push, if any, is given up. Later calls return
  // nothing until it pushes again.
  step_rules::Progress Leave(int worker);
  // Gives up every push opened `timeout` or more before `now`.
  step_rules::Progress Expire(step_rules::Clock::time_point now,
                              step_rules::Clock::duration timeout);

  std::vector<step_rules::OpenPush> open_pushes() const;
  // When the oldest open push passes `timeout`; max() when none is open.
  step_rules::Clock::time_point NextPushDeadline(step_rules::Clock::duration timeout) const;

 private:
  struct Push {
    bool open = false;
    bool given_up = false;   // ended incomplete (Leave, Expire): its late chunks are dropped
    int64_t from_step = 0;   // the header's step
    int64_t counted_at = 0;  // the ps's step when it opened (Admission::step)
    uint32_t num_chunks = 0;
    uint32_t chunks_in = 0;
    std::vector<bool> seen;  // per chunk (its storage kept from push to push)
    step_rules::Clock::time_point opened;
  };

  int64_t step_;
  std::vector<Push> pushes_;  // per worker seen
  WorkerMembership membership_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_ASYNC_STEP_RULES_H_
