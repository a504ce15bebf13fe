// Writes a ps task's checkpoints from a thread of its own: when the global step reaches the next
// multiple of `every_steps` (woken by the step coordinator, no polling: the checkpoint holds that
// step plus those made while the thread woke up) and once `every_s` seconds have passed since the
// last one and the step has moved (0 turns either off); then once more when stopped, so a ps that
// shuts down cleanly loses nothing. A ps killed loses the steps since its newest checkpoint: at
// most every_steps plus those made while the next one was being written. A failed periodic
// checkpoint is logged as an ERROR and tried again after `retry`; a failed final one is Stop's
// error (the ps then exits non-zero).
#ifndef PSFLOW_PS_CHECKPOINT_SCHEDULER_H_
#define PSFLOW_PS_CHECKPOINT_SCHEDULER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ps/ps_state.h"

namespace psflow {

class CheckpointScheduler {
 public:
  struct Options {
    double every_s = 60;      // 0: not by time
    int64_t every_steps = 0;  // 0: not by steps
    // After a failed checkpoint, the wait before the next try.
    std::chrono::milliseconds retry{1000};
  };

  // INVALID_ARGUMENT naming the flag for a negative interval.
  static absl::Status Check(const Options& options);

  // Starts the thread; `state` (which has a checkpoint folder) must outlive the scheduler, and
  // its coordinator's step watch is the scheduler's until Stop.
  CheckpointScheduler(PsState& state, Options options);
  ~CheckpointScheduler();  // Stop()
  CheckpointScheduler(const CheckpointScheduler&) = delete;
  CheckpointScheduler& operator=(const CheckpointScheduler&) = delete;

  // Stops the thread and writes the final checkpoint: the error of writing it, if that failed.
  // Later calls do nothing and return OK.
  absl::Status Stop();

  // Checkpoints written so far (the final one included).
  int64_t written() const;

 private:
  void Loop();
  // One checkpoint: its global step, -1 when there was nothing to save, or why it failed.
  absl::StatusOr<int64_t> WriteOne();

  PsState& state_;
  const Options options_;
  // The global step when the scheduler was made: steps count from here, whenever the thread runs.
  const int64_t start_step_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool step_due_ ABSL_GUARDED_BY(mu_) = false;  // the coordinator's step watch fired
  int64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_CHECKPOINT_SCHEDULER_H_
