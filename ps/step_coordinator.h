// The global step of one ps task, made thread-safe, and the calls parked until a step is
// reached. The rules that move the step are pure state machines, one per mode:
// async_step_rules.h (every chunk applied as it arrives) and sync_step_rules.h (TensorFlow's
// SyncReplicasOptimizer rules, per partition); this class holds the one Start chose under its
// lock, stamps events with the time, gives pushes up on a timer, and answers parked calls.
//
// The caller's protocol per chunk (PsState): Admit -> (sync, kAccumulate) stage the payload ->
// ChunkAccumulated -> discard the staged pieces of Progress::given_up, apply the returned
// partitions (averaged over Progress::workers; none: no update) -> PartitionsApplied (always,
// even with nothing to apply) -> Wake the returned calls after releasing its locks. Leave and
// ExpirePushes return a Progress the same way (async: given_up only, nothing to apply).
//
// Waiting: Park(min_step, partitions, deadline, done) calls done(true) as soon as the step is >=
// min_step, or is min_step - 1 with every listed partition already applied (immediately when that
// holds), done(false) at the deadline or on Stop; no partitions: the whole step. Before the ps is
// ready the step is -1, so Park(0, ...) waits for readiness. Callbacks run on the thread that
// advanced the step (or the timer thread) without the lock held.
//
// Elastic workers: each worker that joins or leaves (worker_membership.h) is logged as it
// happens, with the contributions a sync step now waits for; workers() says how many count.
// Thread-safe.
#ifndef PSFLOW_PS_STEP_COORDINATOR_H_
#define PSFLOW_PS_STEP_COORDINATOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "ps/async_step_rules.h"
#include "ps/step_rules.h"
#include "ps/sync_step_rules.h"

namespace psflow {

class StepCoordinator {
 public:
  static constexpr uint32_t kMaxChunks = step_rules::kMaxChunks;
  // How long a push may stay incomplete before it is given up (well under the workers' pull
  // deadline, --ps_timeout_s, 60 s by default, so the others' parked pulls outlast it).
  static constexpr std::chrono::seconds kDefaultPushTimeout{30};

  using Verdict = step_rules::Verdict;
  using Progress = step_rules::Progress;
  using OpenPush = step_rules::OpenPush;
  // Parked calls made due by a step change, to be answered (Wake) once the caller has released
  // its own locks.
  using Wakeups = std::vector<std::pair<std::function<void(bool)>, bool>>;
  static void Wake(Wakeups wakeups);

  struct Admission : step_rules::Admission {
    // Async: the parked calls the step's advance made due, for the caller to Wake once it holds
    // none of its own locks (a parked pull's answer takes them).
    Wakeups wake;
  };

  explicit StepCoordinator(std::chrono::milliseconds push_timeout = kDefaultPushTimeout);
  ~StepCoordinator();  // Stop()s

  // Called on the timer thread, without the lock, once a push has been incomplete for
  // push_timeout; it is to call ExpirePushes (with the caller's locks) and apply what that
  // returns. Set before Start; it must stay callable until Stop() returns (Stop waits for a call
  // in progress). None: pushes are never given up.
  void SetExpiryHandler(std::function<void()> handler);

  // INVALID_ARGUMENT for a sync config with total_workers < 1 or replicas_to_aggregate < 0 or
  // > total_workers.
  static absl::Status CheckSyncConfig(const proto::SyncConfig& sync);

  // Makes the ps ready at `step` with `sync`'s rules (SyncStepRules or AsyncStepRules), waking
  // the parked calls. partition_elements: the size of each partition, in the order segments
  // index them (SyncStepRules). counted: the workers counted from the start; none given: workers
  // 0 .. total_workers - 1 (a job's start). Errors as CheckSyncConfig.
  absl::Status Start(const proto::SyncConfig& sync, int64_t step,
                     std::vector<int64_t> partition_elements = {},
                     std::optional<std::vector<int>> counted = std::nullopt);
  bool ready() const;
  bool stopped() const;  // Stop was called
  int64_t step() const;
  proto::SyncConfig sync() const;
  // Calls `reached` once, as soon as step() >= target (at once, on this thread, when it already
  // is): under the coordinator's lock, so it must be quick and must not call the coordinator.
  // One watch at a time: a later call replaces it. After ClearStepWatch returns, no call of it
  // runs or will run.
  void WatchStep(int64_t target, std::function<void()> reached);
  void ClearStepWatch();
  // The step the listed partitions' values are at: step() + 1 when every one of them was already
  // applied in the current sync step, else step(). Empty: step().
  int64_t step_of(std::span<const uint32_t> partitions) const;
  // Sync: some partitions of the current step are applied (or being applied) and others not yet:
  // a checkpoint now would see half a step.
  bool mid_step() const;

  // The mode's rules' verdict on a gradient chunk (header already validated for shape): see
  // AsyncStepRules::Admit and SyncStepRules::Admit. Async: a push's first chunk advances the step
  // (the calls that makes due: Admission::wake). FAILED_PRECONDITION before Start.
  absl::StatusOr<Admission> Admit(const proto::TransferHeader& header);

  // Sync: the admitted chunk's gradients are staged (SyncStepRules::Staged).
  Progress ChunkAccumulated(const proto::TransferHeader& header);
  // Async: the pushes open now.
  std::vector<OpenPush> open_pushes() const;
  // Sync: the number of workers admitted to the current step.
  int workers_in_step() const;
  // The workers counted now (sync: those a step waits for, less workers whose push was given up
  // until they push again); 0 before Start. Lock-free.
  int workers() const { return workers_.load(std::memory_order_relaxed); }
  // Which (what a checkpoint keeps), ascending.
  std::vector<int> counted_workers() const;
  // Sync: progress.apply was applied (SyncStepRules::Applied). *completed_step (when given) is
  // set to whether this call completed the step. Returns the parked calls now due, for the
  // caller to Wake after releasing its locks.
  [[nodiscard]] Wakeups PartitionsApplied(const Progress& progress, bool* completed_step = nullptr);

  // The worker has finished: its incomplete push is given up (the mode's Leave).
  Progress Leave(int worker);

  // Gives up every push incomplete for push_timeout or longer (the mode's Expire).
  Progress ExpirePushes();

  void Park(int64_t min_step, std::vector<uint32_t> partitions,
            std::chrono::steady_clock::time_point deadline, std::function<void(bool reached)> done);
  // Answers every parked call with false, and every later Park at once; no expiry handler call
  // starts after it, and one in progress has returned when Stop does.
  void Stop();

 private:
  struct Parked {
    int64_t min_step;
    std::vector<uint32_t> partitions;
    std::chrono::steady_clock::time_point deadline;
    std::function<void(bool)> done;
  };
  int64_t StepLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReachedLocked(const Parked& p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The earliest time an incomplete push passes push_timeout; max() when none is incomplete.
  std::chrono::steady_clock::time_point NextPushDeadlineLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the parked calls that are due (reached, expired or stopping) out.
  Wakeups TakeDueLocked(std::chrono::steady_clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();
  // Fires the step watch when the step has reached its target.
  void StepMovedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs who joined or left since the last call and updates workers_.
  void MembershipMovedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  proto::SyncConfig sync_ ABSL_GUARDED_BY(mu_);
  // The mode's rules, from Start: exactly one is set once ready.
  std::optional<AsyncStepRules> async_ ABSL_GUARDED_BY(mu_);
  std::optional<SyncStepRules> sync_rules_ ABSL_GUARDED_BY(mu_);
  int64_t watch_target_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> watch_ ABSL_GUARDED_BY(mu_);  // WatchStep's, until it fires
  const std::chrono::milliseconds push_timeout_;
  std::function<void()> expiry_handler_;        // set before Start, read by the timer thread
  bool expiring_ ABSL_GUARDED_BY(mu_) = false;  // the handler is running
  std::vector<Parked> parked_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> workers_{0};  // written under mu_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_STEP_COORDINATOR_H_
