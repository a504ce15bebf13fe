#include "ps/step_coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace psflow {

StepCoordinator::StepCoordinator() : timer_([this] { TimerLoop(); }) {}

StepCoordinator::~StepCoordinator() {
  Stop();
  timer_.join();
}

absl::Status StepCoordinator::CheckSyncConfig(const proto::SyncConfig& sync) {
  if (sync.total_workers() < 1 || sync.replicas_to_aggregate() < 0 ||
      sync.replicas_to_aggregate() > sync.total_workers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sync config: total_workers ", sync.total_workers(),
                     ", replicas_to_aggregate ", sync.replicas_to_aggregate(),
                     " (need total_workers >= 1 and 0 <= replicas_to_aggregate <= total_workers)"));
  }
  return absl::OkStatus();
}

absl::Status StepCoordinator::Start(const proto::SyncConfig& sync, int64_t step) {
  RETURN_IF_ERROR(CheckSyncConfig(sync));
  Wakeups due;
  {
    std::lock_guard lock(mu_);
    sync_ = sync;
    required_ =
        sync.replicas_to_aggregate() == 0 ? sync.total_workers() : sync.replicas_to_aggregate();
    left_.assign(static_cast<size_t>(sync.total_workers()), false);
    step_ = std::max<int64_t>(step, 0);
    due = TakeDueLocked(std::chrono::steady_clock::now());
  }
  for (auto& [fn, reached] : due) fn(reached);
  return absl::OkStatus();
}

bool StepCoordinator::ready() const {
  std::lock_guard lock(mu_);
  return step_ >= 0;
}

int64_t StepCoordinator::step() const {
  std::lock_guard lock(mu_);
  return step_;
}

proto::SyncConfig StepCoordinator::sync() const {
  std::lock_guard lock(mu_);
  return sync_;
}

absl::StatusOr<StepCoordinator::Admission> StepCoordinator::Admit(
    const proto::TransferHeader& header) {
  std::unique_lock lock(mu_);
  if (step_ < 0) return absl::FailedPreconditionError("variables are not initialised yet");
  if (header.step() > step_) {
    return absl::InvalidArgumentError(absl::StrCat("gradients computed at step ", header.step(),
                                                   ", a step from the future (the ps is at ", step_,
                                                   ")"));
  }
  if (header.worker() < 0 || header.worker() >= sync_.total_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("push from worker ", header.worker(),
                                                   "; the job has ", sync_.total_workers()));
  }
  if (header.num_chunks() == 0 || header.num_chunks() > kMaxChunks ||
      header.chunk() >= header.num_chunks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("push chunk ", header.chunk(), " of ", header.num_chunks()));
  }
  Admission a;
  a.step = step_;
  a.staleness = step_ - header.step();
  if (!sync_.sync_replicas()) {
    if (header.chunk() == 0) {
      ++step_;
      // Wake the calls parked for this step (as FinishStep does in sync mode), without the lock.
      auto due = TakeDueLocked(std::chrono::steady_clock::now());
      lock.unlock();
      for (auto& [fn, reached] : due) fn(reached);
    }
    return a;
  }
  if (header.step() < step_) {
    a.verdict = Verdict::kDropStale;
    return a;
  }
  auto it = admitted_.find(header.worker());
  if (it == admitted_.end()) {
    if (applying_ || static_cast<int>(admitted_.size()) >= required_) {
      a.verdict = Verdict::kDropBackup;
      return a;
    }
    it = admitted_.emplace(header.worker(), 0).first;
    num_chunks_[header.worker()] = header.num_chunks();
    seen_[header.worker()].assign(header.num_chunks(), false);
  } else if (num_chunks_[header.worker()] != header.num_chunks() ||
             seen_[header.worker()][header.chunk()]) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", header.worker(), " sent chunk ", header.chunk(), " of ",
                     header.num_chunks(), " twice or with another count (its push has ",
                     num_chunks_[header.worker()], ") for step ", step_));
  }
  seen_[header.worker()][header.chunk()] = true;
  a.verdict = Verdict::kAccumulate;
  return a;
}

bool StepCoordinator::StepCompleteLocked() const {
  const int live = sync_.total_workers() - left_count_;
  const int needed = std::min(required_, live);
  return !applying_ && completed_ > 0 && completed_ >= needed;
}

bool StepCoordinator::ChunkAccumulated(const proto::TransferHeader& header) {
  std::lock_guard lock(mu_);
  auto it = admitted_.find(header.worker());
  if (it == admitted_.end()) return false;
  if (++it->second == num_chunks_[header.worker()]) ++completed_;
  if (!StepCompleteLocked()) return false;
  applying_ = true;
  return true;
}

int StepCoordinator::workers_in_step() const {
  std::lock_guard lock(mu_);
  return completed_;
}

void StepCoordinator::Wake(Wakeups wakeups) {
  for (auto& [fn, reached] : wakeups) fn(reached);
}

StepCoordinator::Wakeups StepCoordinator::FinishStep() {
  std::lock_guard lock(mu_);
  ++step_;
  admitted_.clear();
  num_chunks_.clear();
  seen_.clear();
  completed_ = 0;
  applying_ = false;
  return TakeDueLocked(std::chrono::steady_clock::now());
}

bool StepCoordinator::Leave(int worker) {
  std::lock_guard lock(mu_);
  if (worker < 0 || static_cast<size_t>(worker) >= left_.size() || left_[worker]) return false;
  left_[worker] = true;
  ++left_count_;
  // A worker that leaves halfway through a push gives its place in the step back. (What it
  // already sent stays in the accumulators: the client leaves only after its last push.)
  auto it = admitted_.find(worker);
  if (it != admitted_.end() && it->second < num_chunks_[worker]) {
    admitted_.erase(it);
    num_chunks_.erase(worker);
    seen_.erase(worker);
  }
  if (!sync_.sync_replicas() || !StepCompleteLocked()) return false;
  applying_ = true;
  return true;
}

void StepCoordinator::Park(int64_t min_step, std::chrono::steady_clock::time_point deadline,
                           std::function<void(bool)> done) {
  bool answer_now = false;
  bool reached = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || (step_ >= 0 && step_ >= min_step)) {
      answer_now = true;
      reached = !stopping_;
    } else {
      parked_.push_back({min_step, deadline, std::move(done)});
      cv_.notify_one();
    }
  }
  if (answer_now) done(reached);
}

void StepCoordinator::Stop() {
  Wakeups due;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    due = TakeDueLocked(std::chrono::steady_clock::now());
    cv_.notify_one();
  }
  for (auto& [fn, reached] : due) fn(reached);
}

StepCoordinator::Wakeups StepCoordinator::TakeDueLocked(std::chrono::steady_clock::time_point now) {
  Wakeups due;
  auto keep = parked_.begin();
  for (auto it = parked_.begin(); it != parked_.end(); ++it) {
    const bool reached = !stopping_ && step_ >= 0 && step_ >= it->min_step;
    if (reached || stopping_ || it->deadline <= now) {
      due.emplace_back(std::move(it->done), reached);
    } else {
      if (keep != it) *keep = std::move(*it);
      ++keep;
    }
  }
  parked_.erase(keep, parked_.end());
  return due;
}

void StepCoordinator::TimerLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto next = std::chrono::steady_clock::time_point::max();
    for (const Parked& p : parked_) next = std::min(next, p.deadline);
    if (next == std::chrono::steady_clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
    auto due = TakeDueLocked(std::chrono::steady_clock::now());
    if (due.empty()) continue;
    lock.unlock();
    for (auto& [fn, reached] : due) fn(reached);
    lock.lock();
  }
}

}  // namespace psflow
