#include "ps/step_coordinator.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace psflow {

StepCoordinator::StepCoordinator(std::chrono::milliseconds push_timeout)
    : push_timeout_(push_timeout), timer_([this] { TimerLoop(); }) {}

StepCoordinator::~StepCoordinator() {
  Stop();
  timer_.join();
}

void StepCoordinator::SetExpiryHandler(std::function<void()> handler) {
  std::lock_guard lock(mu_);
  expiry_handler_ = std::move(handler);
  cv_.notify_all();  // the timer may sleep with no deadline: it now has push deadlines
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
                                    std::vector<int64_t> partition_elements,
                                    std::optional<std::vector<int>> counted) {
  RETURN_IF_ERROR(CheckSyncConfig(sync));
  Wakeups due;
  {
    std::lock_guard lock(mu_);
    sync_ = sync;
    async_.reset();
    sync_rules_.reset();
    WorkerMembership members =
        counted ? WorkerMembership::Of(*counted) : WorkerMembership(sync.total_workers());
    if (sync.sync_replicas()) {
      sync_rules_.emplace(sync, step, std::move(partition_elements), std::move(members));
    } else {
      async_.emplace(std::move(members), step);
    }
    MembershipMovedLocked();
    StepMovedLocked();
    due = TakeDueLocked(std::chrono::steady_clock::now());
  }
  for (auto& [fn, reached] : due) fn(reached);
  return absl::OkStatus();
}

bool StepCoordinator::ready() const {
  std::lock_guard lock(mu_);
  return StepLocked() >= 0;
}

int64_t StepCoordinator::StepLocked() const {
  if (async_) return async_->step();
  if (sync_rules_) return sync_rules_->step();
  return -1;
}

bool StepCoordinator::stopped() const {
  std::lock_guard lock(mu_);
  return stopping_;
}

int64_t StepCoordinator::step() const {
  std::lock_guard lock(mu_);
  return StepLocked();
}

void StepCoordinator::WatchStep(int64_t target, std::function<void()> reached) {
  std::lock_guard lock(mu_);
  watch_target_ = target;
  watch_ = std::move(reached);
  StepMovedLocked();
}

void StepCoordinator::ClearStepWatch() {
  std::lock_guard lock(mu_);
  watch_ = nullptr;
}

void StepCoordinator::MembershipMovedLocked() {
  std::vector<MembershipChange> changes;
  if (sync_rules_) {
    changes = sync_rules_->TakeMembershipChanges();
    workers_.store(sync_rules_->workers(), std::memory_order_relaxed);
  } else if (async_) {
    changes = async_->TakeMembershipChanges();
    workers_.store(async_->workers(), std::memory_order_relaxed);
  }
  for (const MembershipChange& c : changes) {
    if (c.kind == MembershipChange::Kind::kJoining) {
      PSFLOW_LOG(INFO) << "worker " << c.worker << " pushed at step " << c.step
                       << " and joins the job at the next step (its push was dropped)";
      continue;
    }
    // Sync: what the next steps wait for while everyone counted pushes (the step under way may
    // still count a worker that left after its push was whole; a worker whose push is given up
    // does not count until it pushes again).
    const int r = sync_.replicas_to_aggregate();
    PSFLOW_LOG(INFO) << "worker " << c.worker
                     << (c.kind == MembershipChange::Kind::kJoined ? " joined" : " left")
                     << " at step " << c.step << ": " << c.members << " worker(s)"
                     << (sync_rules_ ? absl::StrCat("; a step waits for ",
                                                    r == 0 ? c.members : std::min(r, c.members),
                                                    " contribution(s)")
                                     : std::string());
  }
}

void StepCoordinator::StepMovedLocked() {
  if (!watch_ || StepLocked() < watch_target_) return;
  std::function<void()> reached = std::move(watch_);
  watch_ = nullptr;
  reached();
}

proto::SyncConfig StepCoordinator::sync() const {
  std::lock_guard lock(mu_);
  return sync_;
}

int64_t StepCoordinator::step_of(std::span<const uint32_t> partitions) const {
  std::lock_guard lock(mu_);
  if (partitions.empty() || !sync_rules_) return StepLocked();
  for (uint32_t p : partitions) {
    if (!sync_rules_->applied(p)) return StepLocked();
  }
  return StepLocked() + 1;
}

bool StepCoordinator::mid_step() const {
  std::lock_guard lock(mu_);
  return sync_rules_ && sync_rules_->mid_step();
}

absl::StatusOr<StepCoordinator::Admission> StepCoordinator::Admit(
    const proto::TransferHeader& header) {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  Admission a;
  if (sync_rules_) {
    ASSIGN_OR_RETURN(static_cast<step_rules::Admission&>(a), sync_rules_->Admit(header, now));
    MembershipMovedLocked();
    return a;
  }
  if (!async_) return absl::FailedPreconditionError("variables are not initialised yet");
  ASSIGN_OR_RETURN(static_cast<step_rules::Admission&>(a), async_->Admit(header, now));
  MembershipMovedLocked();
  if (a.opens_push) {
    StepMovedLocked();
    // The calls parked for this step, for the caller to wake (as PartitionsApplied's in sync
    // mode) once it holds no lock a parked call's answer takes.
    a.wake = TakeDueLocked(now);
  }
  return a;
}

StepCoordinator::Progress StepCoordinator::ChunkAccumulated(const proto::TransferHeader& header) {
  std::lock_guard lock(mu_);
  return sync_rules_ ? sync_rules_->Staged(header) : Progress{};
}

std::vector<StepCoordinator::OpenPush> StepCoordinator::open_pushes() const {
  std::lock_guard lock(mu_);
  return async_ ? async_->open_pushes() : std::vector<OpenPush>{};
}

std::vector<int> StepCoordinator::counted_workers() const {
  std::lock_guard lock(mu_);
  if (sync_rules_) return sync_rules_->counted_workers();
  return async_ ? async_->counted_workers() : std::vector<int>{};
}

int StepCoordinator::workers_in_step() const {
  std::lock_guard lock(mu_);
  return sync_rules_ ? sync_rules_->workers_in_step() : 0;
}

void StepCoordinator::Wake(Wakeups wakeups) {
  for (auto& [fn, reached] : wakeups) fn(reached);
}

StepCoordinator::Wakeups StepCoordinator::PartitionsApplied(const Progress& progress,
                                                            bool* completed_step) {
  std::lock_guard lock(mu_);
  const bool done = sync_rules_ && sync_rules_->Applied(progress);
  if (done) {
    MembershipMovedLocked();  // workers waiting to join count from the new step
    StepMovedLocked();
  }
  if (completed_step != nullptr) *completed_step = done;
  if (!done && progress.apply.empty()) return {};
  return TakeDueLocked(std::chrono::steady_clock::now());
}

StepCoordinator::Progress StepCoordinator::Leave(int worker) {
  std::lock_guard lock(mu_);
  Progress progress;
  if (sync_rules_) progress = sync_rules_->Leave(worker);
  if (async_) progress = async_->Leave(worker);
  MembershipMovedLocked();
  return progress;
}

StepCoordinator::Progress StepCoordinator::ExpirePushes() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  Progress progress;
  if (sync_rules_) progress = sync_rules_->Expire(now, push_timeout_);
  if (async_) progress = async_->Expire(now, push_timeout_);
  workers_.store(sync_rules_ ? sync_rules_->workers()
                 : async_    ? async_->workers()
                             : 0,
                 std::memory_order_relaxed);
  return progress;
}

std::chrono::steady_clock::time_point StepCoordinator::NextPushDeadlineLocked() const {
  if (sync_rules_) return sync_rules_->NextPushDeadline(push_timeout_);
  if (async_) return async_->NextPushDeadline(push_timeout_);
  return std::chrono::steady_clock::time_point::max();
}

bool StepCoordinator::ReachedLocked(const Parked& p) const {
  const int64_t step = StepLocked();
  if (stopping_ || step < 0) return false;
  if (step >= p.min_step) return true;
  if (p.partitions.empty() || p.min_step != step + 1 || !sync_rules_) return false;
  for (uint32_t q : p.partitions) {
    if (!sync_rules_->applied(q)) return false;
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
    std::unique_lock lock(mu_);
    stopping_ = true;
    due = TakeDueLocked(std::chrono::steady_clock::now());
    cv_.notify_all();
    // The timer thread itself never calls Stop: no wait on its own handler call.
    if (std::this_thread::get_id() != timer_.get_id()) {
      cv_.wait(lock, [this] { return !expiring_; });
    }
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
    const auto push_deadline = NextPushDeadlineLocked();
    if (expiry_handler_) {
      // A push opened while this thread sleeps is not announced (that would cost every push a
      // wake-up): it looks again every half timeout, so it sees each deadline before it passes.
      next = std::min({next, push_deadline, std::chrono::steady_clock::now() + push_timeout_ / 2});
    }
    if (next == std::chrono::steady_clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
    if (stopping_) break;
    const auto now = std::chrono::steady_clock::now();
    if (expiry_handler_ && NextPushDeadlineLocked() <= now) {
      expiring_ = true;
      lock.unlock();
      expiry_handler_();
      lock.lock();
      expiring_ = false;
      cv_.notify_all();
    }
    auto due = TakeDueLocked(std::chrono::steady_clock::now());
    if (due.empty()) continue;
    lock.unlock();
    for (auto& [fn, reached] : due) fn(reached);
    lock.lock();
  }
}

}  // namespace psflow
