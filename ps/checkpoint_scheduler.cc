#include "ps/checkpoint_scheduler.h"

#include <algorithm>

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
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.poll);
    if (stopping_) break;
    const int64_t step = state_.global_step();
    if (step < 0 || step == last_step) continue;
    const double since = std::chrono::duration<double>(Clock::now() - last_time).count();
    if ((options_.every_s > 0 && since >= options_.every_s) ||
        (options_.every_steps > 0 && step - last_step >= options_.every_steps)) {
      lock.unlock();
      const absl::StatusOr<int64_t> written = WriteOne();  // a failure is tried again later
      lock.lock();
      if (written.ok() && *written >= 0) last_step = *written;
      last_time = Clock::now();
    }
  }
}

}  // namespace psflow
