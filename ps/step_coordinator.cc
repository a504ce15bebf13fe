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

absl::Status StepCoordinator::Start(const proto::SyncConfig& sync, int64_t step,
                                    std::vector<int64_t> partition_elements) {
  RETURN_IF_ERROR(CheckSyncConfig(sync));
  Wakeups due;
  {
    std::lock_guard lock(mu_);
    sync_ = sync;
    required_ =
        sync.replicas_to_aggregate() == 0 ? sync.total_workers() : sync.replicas_to_aggregate();
    left_.assign(static_cast<size_t>(sync.total_workers()), false);
    partition_state_.assign(partition_elements.size(), PartitionState::kWaiting);
    partition_elements_ = std::move(partition_elements);
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

int64_t StepCoordinator::step_of(std::span<const uint32_t> partitions) const {
  std::lock_guard lock(mu_);
  if (partitions.empty()) return step_;
  for (uint32_t p : partitions) {
    if (p >= partition_state_.size() || partition_state_[p] != PartitionState::kApplied) {
      return step_;
    }
  }
  return step_ + 1;
}

bool StepCoordinator::mid_step() const {
  std::lock_guard lock(mu_);
  return applying_;
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
      // Wake the calls parked for this step (as PartitionsApplied does in sync mode), without the
      // lock.
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
  } else if (it->second.num_chunks != header.num_chunks() || it->second.seen[header.chunk()]) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", header.worker(), " sent chunk ",
                                                   header.chunk(), " of ", header.num_chunks(),
                                                   " twice or with another count (its push has ",
                                                   it->second.num_chunks, ") for step ", step_));
  }
  // Dense elements past a partition's size: some were sent twice. Checked before any change.
  const size_t partitions = partition_elements_.size();
  absl::InlinedVector<int64_t, 8> adding(partitions, 0);
  for (const proto::Segment& s : header.segments()) {
    if (s.rows_size() > 0 || s.partition() >= partitions) continue;
    adding[s.partition()] += s.count();
    const int64_t before = it == admitted_.end() ? 0 : it->second.admitted_elements[s.partition()];
    if (before + adding[s.partition()] > partition_elements_[s.partition()]) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", header.worker(),
                                                     " sent elements of partition ", s.partition(),
                                                     " twice for step ", step_));
    }
  }
  if (it == admitted_.end()) {
    WorkerPush push;
    push.num_chunks = header.num_chunks();
    push.seen.assign(header.num_chunks(), false);
    push.admitted_elements.assign(partitions, 0);
    push.staged_elements.assign(partitions, 0);
    push.delivered.assign(partitions, false);
    it = admitted_.emplace(header.worker(), std::move(push)).first;
  }
  it->second.seen[header.chunk()] = true;
  for (size_t p = 0; p < partitions; ++p) it->second.admitted_elements[p] += adding[p];
  a.verdict = Verdict::kAccumulate;
  return a;
}

bool StepCoordinator::AdmissionFinalLocked() const {
  const int live = sync_.total_workers() - left_count_;
  return !admitted_.empty() && static_cast<int>(admitted_.size()) >= std::min(required_, live);
}

StepCoordinator::Progress StepCoordinator::TakeReadyLocked() {
  Progress progress;
  if (!AdmissionFinalLocked()) return progress;
  bool pending = false;  // a partition still waiting or being applied elsewhere
  for (size_t p = 0; p < partition_state_.size(); ++p) {
    if (partition_state_[p] != PartitionState::kWaiting) {
      pending = pending || partition_state_[p] == PartitionState::kApplying;
      continue;
    }
    bool ready = true;
    for (const auto& [worker, push] : admitted_) ready = ready && push.delivered[p];
    if (!ready) {
      pending = true;
      continue;
    }
    partition_state_[p] = PartitionState::kApplying;
    progress.apply.push_back(static_cast<uint32_t>(p));
  }
  bool complete = true;
  for (const auto& [worker, push] : admitted_) {
    progress.workers.push_back(worker);
    complete = complete && push.complete();
  }
  // Said once per step; admission closes with it, as with the first partition applied.
  progress.completes_step = complete && !pending && !completion_told_;
  completion_told_ = completion_told_ || progress.completes_step;
  if (!progress.apply.empty() || progress.completes_step) applying_ = true;
  return progress;
}

StepCoordinator::Progress StepCoordinator::ChunkAccumulated(const proto::TransferHeader& header) {
  std::lock_guard lock(mu_);
  auto it = admitted_.find(header.worker());
  if (it == admitted_.end()) return {};
  WorkerPush& push = it->second;
  for (const proto::Segment& s : header.segments()) {
    if (s.rows_size() > 0 || s.partition() >= partition_elements_.size()) continue;
    push.staged_elements[s.partition()] += s.count();
    if (push.staged_elements[s.partition()] == partition_elements_[s.partition()]) {
      push.delivered[s.partition()] = true;
    }
  }
  // The whole push is in: every partition (sparse ones, and any it sent nothing of) delivered.
  if (++push.chunks_in == push.num_chunks) push.delivered.assign(push.delivered.size(), true);
  return TakeReadyLocked();
}

int StepCoordinator::workers_in_step() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(admitted_.size());
}

void StepCoordinator::Wake(Wakeups wakeups) {
  for (auto& [fn, reached] : wakeups) fn(reached);
}

StepCoordinator::Wakeups StepCoordinator::PartitionsApplied(const Progress& progress) {
  std::lock_guard lock(mu_);
  for (uint32_t p : progress.apply) partition_state_[p] = PartitionState::kApplied;
  bool done = AdmissionFinalLocked();
  for (const auto& [worker, push] : admitted_) done = done && push.complete();
  for (PartitionState state : partition_state_) done = done && state == PartitionState::kApplied;
  if (done) {
    ++step_;
    admitted_.clear();
    partition_state_.assign(partition_state_.size(), PartitionState::kWaiting);
    applying_ = false;
    completion_told_ = false;
  }
  if (!done && progress.apply.empty()) return {};
  return TakeDueLocked(std::chrono::steady_clock::now());
}

StepCoordinator::Progress StepCoordinator::Leave(int worker) {
  std::lock_guard lock(mu_);
  if (worker < 0 || static_cast<size_t>(worker) >= left_.size() || left_[worker]) return {};
  left_[worker] = true;
  ++left_count_;
  if (!sync_.sync_replicas()) return {};
  // A worker that leaves halfway through a push gives its place in the step back; its staged
  // pieces are never applied (the callers apply Progress::workers' only).
  auto it = admitted_.find(worker);
  if (it != admitted_.end() && !it->second.complete()) admitted_.erase(it);
  return TakeReadyLocked();
}

bool StepCoordinator::ReachedLocked(const Parked& p) const {
  if (stopping_ || step_ < 0) return false;
  if (step_ >= p.min_step) return true;
  if (p.partitions.empty() || p.min_step != step_ + 1) return false;
  for (uint32_t q : p.partitions) {
    if (q >= partition_state_.size() || partition_state_[q] != PartitionState::kApplied) {
      return false;
    }
  }
  return true;
}

void StepCoordinator::Park(int64_t min_step, std::vector<uint32_t> partitions,
                           std::chrono::steady_clock::time_point deadline,
                           std::function<void(bool)> done) {
  bool answer_now = false;
  bool reached = false;
  {
    std::lock_guard lock(mu_);
    Parked parked{min_step, std::move(partitions), deadline, std::move(done)};
    if (stopping_ || ReachedLocked(parked)) {
      answer_now = true;
      reached = !stopping_;
      done = std::move(parked.done);
    } else {
      parked_.push_back(std::move(parked));
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
    const bool reached = ReachedLocked(*it);
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
