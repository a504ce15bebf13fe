// Which workers a ps task counts on, for its step rules (sync_step_rules.h, async_step_rules.h):
// elastic workers (`kubectl scale` on a TrainingJob) come and go while the job runs.
//
// Workers 0 .. initial - 1 (the job's workers when the chief created the variables) are members
// from the start. A worker that is not a member (a new one, or one that left and came back: a
// restarted pod) joins with its first push: in async mode at once (Join); in sync mode at once
// between steps, else it waits (MarkJoining) and every waiting worker becomes a member at the
// next step boundary (JoinWaiting), so the number of contributions a step waits for changes only
// between steps. A member that Leaves (it finished, or was scaled away and stopped cleanly) no
// longer counts.
// Every change is recorded with the step it happened at, for the ps's log and metrics
// (TakeChanges). Pure: no lock, no clock. Not thread-safe.
#ifndef PSFLOW_PS_WORKER_MEMBERSHIP_H_
#define PSFLOW_PS_WORKER_MEMBERSHIP_H_

#include <cstdint>
#include <vector>

namespace psflow {

// Worker indexes a ps task accepts: [0, kMaxWorkers).
inline constexpr int kMaxWorkers = 4096;

struct MembershipChange {
  enum class Kind : uint8_t {
    kJoined,   // a member from now on
    kJoining,  // sync: a member from the next step boundary
    kLeft,     // no longer a member
  };
  Kind kind = Kind::kJoined;
  int worker = 0;
  int64_t step = 0;  // the ps's step when it happened
  int members = 0;   // members after it

  bool operator==(const MembershipChange&) const = default;
};

class WorkerMembership {
 public:
  enum class State : uint8_t { kNone, kMember, kJoining, kLeft };

  // Workers 0 .. initial - 1 are members (initial is clamped to [0, kMaxWorkers]).
  explicit WorkerMembership(int initial);
  // Exactly `workers` are members (indexes outside [0, kMaxWorkers) are ignored).
  static WorkerMembership Of(const std::vector<int>& workers);

  // kNone for an index never seen (or outside [0, kMaxWorkers)).
  State state(int worker) const;
  bool member(int worker) const { return state(worker) == State::kMember; }
  int members() const { return members_; }
  std::vector<int> Members() const;  // ascending

  // The worker is a member from now on; false (nothing recorded) when it already was or the
  // index is outside [0, kMaxWorkers).
  bool Join(int worker, int64_t step);
  // Sync: the worker becomes a member at the next JoinWaiting; false when it is a member or
  // already waiting, or the index is out of range.
  bool MarkJoining(int worker, int64_t step);
  // Every waiting worker becomes a member (a step boundary); returns them, ascending.
  std::vector<int> JoinWaiting(int64_t step);
  // The worker no longer counts (a waiting one stops waiting). False when it had already left or
  // the index is out of range; a worker never seen is recorded as left, without a change.
  bool Leave(int worker, int64_t step);

  // The changes since the last call, in order.
  std::vector<MembershipChange> TakeChanges();

 private:
  State& StateOf(int worker);  // grows the table; worker in range

  std::vector<State> state_;
  int members_ = 0;
  std::vector<MembershipChange> changes_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_WORKER_MEMBERSHIP_H_
