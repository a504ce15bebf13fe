#include "ps/checkpoint_scheduler.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace psflow {

absl::Status CheckpointScheduler::Check(const Options& options) {
  if (!(options.every_s >= 0) || options.every_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpoint_every_s and --checkpoint_every_steps must be >= 0 (got ",
                     options.every_s, ", ", options.every_steps, ")"));
  }
  return absl::OkStatus();
}

CheckpointScheduler::CheckpointScheduler(PsState& state, Options options)
    : state_(state),
      options_(options),
      start_step_(std::max<int64_t>(0, state.global_step())),
      thread_([this] { Loop(); }) {}

CheckpointScheduler::~CheckpointScheduler() { Stop().IgnoreError(); }

absl::Status CheckpointScheduler::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return absl::OkStatus();
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  return WriteOne().status();
}

int64_t CheckpointScheduler::written() const {
  std::lock_guard lock(mu_);
  return written_;
}

absl::StatusOr<int64_t> CheckpointScheduler::WriteOne() {
  absl::StatusOr<std::optional<int64_t>> step = state_.Checkpoint();
  if (!step.ok()) {
    PSFLOW_LOG(ERROR) << "checkpoint failed: " << step.status().message();
    return step.status();
  }
  if (!step->has_value()) return -1;
  PSFLOW_LOG(INFO) << "checkpoint at global step " << **step;
  std::lock_guard lock(mu_);
  ++written_;
  return **step;
}

void CheckpointScheduler::Loop() {
  using Clock = std::chrono::steady_clock;
  int64_t last_step = start_step_;
  Clock::time_point last_time = Clock::now();
  const auto wake = [this] {
    {
      std::lock_guard lock(mu_);
      step_due_ = true;
    }
    cv_.notify_all();
  };
  for (;;) {
    // What makes the next checkpoint due: the step reaching the next multiple of every_steps, or,
    // once every_s has passed, any step after the last checkpoint's.
    const Clock::time_point now = Clock::now();
    const bool time_due =
        options_.every_s > 0 && now - last_time >= std::chrono::duration<double>(options_.every_s);
    int64_t target = std::numeric_limits<int64_t>::max();
    if (options_.every_steps > 0) {
      target = (last_step / options_.every_steps + 1) * options_.every_steps;
    }
    if (time_due) target = std::min(target, last_step + 1);
    if (target != std::numeric_limits<int64_t>::max()) {
      state_.coordinator().WatchStep(target, wake);
    }
    {
      std::unique_lock lock(mu_);
      const auto due = [this]()
                           ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || step_due_; };
      if (options_.every_s > 0 && !time_due) {
        cv_.wait_until(lock,
                       last_time + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(options_.every_s)),
                       due);
      } else {
        cv_.wait(lock, due);
      }
      if (stopping_) break;
      step_due_ = false;
    }
    const int64_t step = state_.global_step();
    if (step < 0 || step == last_step) continue;
    const bool steps_due = options_.every_steps > 0 && step >= target;
    if (!steps_due &&
        !(options_.every_s > 0 &&
          Clock::now() - last_time >= std::chrono::duration<double>(options_.every_s))) {
      continue;
    }
    const absl::StatusOr<int64_t> written = WriteOne();
    if (!written.ok()) {  // tried again after options_.retry
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, options_.retry,
                       [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; })) {
        break;
      }
      continue;
    }
    // Nothing to save (no folder, not initialised) counts as saved at the step seen.
    last_step = *written >= 0 ? *written : step;
    last_time = Clock::now();
  }
  state_.coordinator().ClearStepWatch();
}

}  // namespace psflow
