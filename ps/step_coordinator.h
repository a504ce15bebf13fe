// The global step of one ps task and the rules that move it: synchronous aggregation or
// asynchronous application, and the calls parked until a step is reached.
//
// Async: every gradient push is applied as it arrives; the push's chunk 0 advances the step by
// one and records its staleness (the step now minus the step the gradient was computed at).
//
// Sync (TensorFlow's SyncReplicasOptimizer): the first `replicas_to_aggregate` workers to push for
// the current step s are admitted; their gradients are summed into the accumulators; when every
// admitted worker has delivered all its chunks the caller applies the average once and calls
// FinishStep, which makes the step s + 1 and wakes the pulls parked for it. A push computed at a
// step older than s is dropped as stale; a push for s from a worker beyond the first
// replicas_to_aggregate (a backup worker) is dropped too, so the slowest never hold the step back.
// A push from a step the ps has not reached is INVALID_ARGUMENT. A worker that Leaves no longer
// counts: the step needs min(replicas_to_aggregate, workers still in the job) pushes.
//
// Waiting: Park(min_step, deadline, done) calls done(true) as soon as the step is >= min_step
// (immediately when it already is), done(false) at the deadline or on Stop. Before the ps is
// ready the step is -1, so Park(0, ...) waits for readiness. Callbacks run on the thread that
// advanced the step (or the timer thread) without the lock held. Thread-safe.
#ifndef PSFLOW_PS_STEP_COORDINATOR_H_
#define PSFLOW_PS_STEP_COORDINATOR_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace psflow {

class StepCoordinator {
 public:
  // Chunks one push may have (4 MiB each: 256 GiB per ps task).
  static constexpr uint32_t kMaxChunks = 1 << 16;

  enum class Verdict {
    kApply,       // async: apply now
    kAccumulate,  // sync: add to the accumulators, then call ChunkAccumulated
    kDropStale,   // computed at an old step
    kDropBackup,  // sync: this step already has its replicas_to_aggregate workers
  };
  struct Admission {
    Verdict verdict = Verdict::kApply;
    int64_t step = 0;       // the ps's step when the push arrived
    int64_t staleness = 0;  // step - the push's step
  };

  // Parked calls made due by a step change, to be answered (Wake) once the caller has released
  // its own locks.
  using Wakeups = std::vector<std::pair<std::function<void(bool)>, bool>>;
  static void Wake(Wakeups wakeups);

  StepCoordinator();
  ~StepCoordinator();  // Stop()s

  // INVALID_ARGUMENT for a sync config with total_workers < 1 or replicas_to_aggregate < 0 or
  // > total_workers.
  static absl::Status CheckSyncConfig(const proto::SyncConfig& sync);

  // Makes the ps ready at `step` with `sync`'s rules, waking the parked calls. Errors as
  // CheckSyncConfig.
  absl::Status Start(const proto::SyncConfig& sync, int64_t step);
  bool ready() const;
  int64_t step() const;
  proto::SyncConfig sync() const;

  // Decides what to do with a gradient chunk (header already validated for shape). Async:
  // chunk 0 advances the step. INVALID_ARGUMENT for a step from the future, a worker index
  // outside the job, or inconsistent chunk numbering; FAILED_PRECONDITION before Start.
  absl::StatusOr<Admission> Admit(const proto::TransferHeader& header);

  // Sync: the admitted chunk's gradients are in the accumulators. True when it completed the
  // step: the caller then applies the average (1 / workers_in_step()) and calls FinishStep.
  bool ChunkAccumulated(const proto::TransferHeader& header);
  int workers_in_step() const;
  // Sync: the average of step s was applied; the step becomes s + 1. The caller Wakes the
  // returned calls after releasing its locks.
  [[nodiscard]] Wakeups FinishStep();

  // The worker has finished. True when that completed the current step (sync): the caller then
  // applies and calls FinishStep as after ChunkAccumulated.
  bool Leave(int worker);

  void Park(int64_t min_step, std::chrono::steady_clock::time_point deadline,
            std::function<void(bool reached)> done);
  // Answers every parked call with false, and every later Park at once.
  void Stop();

 private:
  struct Parked {
    int64_t min_step;
    std::chrono::steady_clock::time_point deadline;
    std::function<void(bool)> done;
  };
  bool StepCompleteLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the parked calls that are due (reached, expired or stopping) out.
  Wakeups TakeDueLocked(std::chrono::steady_clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t step_ ABSL_GUARDED_BY(mu_) = -1;  // -1 until Start
  proto::SyncConfig sync_ ABSL_GUARDED_BY(mu_);
  // sync: replicas_to_aggregate, as given or defaulted
  int required_ ABSL_GUARDED_BY(mu_) = 0;
  // sync: worker -> chunks accumulated this step
  std::map<int, uint32_t> admitted_ ABSL_GUARDED_BY(mu_);
  // sync: worker -> chunks its push has
  std::map<int, uint32_t> num_chunks_ ABSL_GUARDED_BY(mu_);
  // sync: worker -> which of its chunks arrived
  std::map<int, std::vector<bool>> seen_ ABSL_GUARDED_BY(mu_);
  // sync: admitted workers whose chunks are all in
  int completed_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> left_ ABSL_GUARDED_BY(mu_);  // per worker
  int left_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool applying_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Parked> parked_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_STEP_COORDINATOR_H_
