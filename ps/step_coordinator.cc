#include "ps/step_coordinator.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
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
                                    std::vector<int64_t> partition_elements) {
  RETURN_IF_ERROR(CheckSyncConfig(sync));
  Wakeups due;
  {
    std::lock_guard lock(mu_);
    sync_ = sync;
    required_ =
        sync.replicas_to_aggregate() == 0 ? sync.total_workers() : sync.replicas_to_aggregate();
    left_.assign(static_cast<size_t>(sync.total_workers()), false);
    absent_.assign(static_cast<size_t>(sync.total_workers()), false);
    given_up_.assign(static_cast<size_t>(sync.total_workers()), {});
    async_.assign(sync.sync_replicas() ? 0 : static_cast<size_t>(sync.total_workers()), {});
    partition_state_.assign(partition_elements.size(), PartitionState::kWaiting);
    partition_elements_ = std::move(partition_elements);
    step_ = std::max<int64_t>(step, 0);
    StepMovedLocked();
    due = TakeDueLocked(std::chrono::steady_clock::now());
  }
  for (auto& [fn, reached] : due) fn(reached);
  return absl::OkStatus();
}

bool StepCoordinator::ready() const {
  std::lock_guard lock(mu_);
  return step_ >= 0;
}

bool StepCoordinator::stopped() const {
  std::lock_guard lock(mu_);
  return stopping_;
}

int64_t StepCoordinator::step() const {
  std::lock_guard lock(mu_);
  return step_;
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

void StepCoordinator::StepMovedLocked() {
  if (!watch_ || step_ < watch_target_) return;
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
    AsyncPush& push = async_[static_cast<size_t>(header.worker())];
    if (!push.open || push.from_step != header.step() || push.num_chunks != header.num_chunks() ||
        push.seen[header.chunk()]) {
      // A new push (one this worker left open ends as it is: it restarted).
      push.open = true;
      push.from_step = header.step();
      push.counted_at = step_;
      push.num_chunks = header.num_chunks();
      push.chunks_in = 0;
      push.seen.assign(header.num_chunks(), false);
      push.opened = std::chrono::steady_clock::now();
      a.opens_push = true;
      ++step_;
      StepMovedLocked();
    }
    push.seen[header.chunk()] = true;
    a.step = push.counted_at;
    a.staleness = push.counted_at - header.step();
    if (++push.chunks_in == push.num_chunks) {
      push.open = false;
      a.closes_push = true;
    }
    // The calls parked for this step, for the caller to wake (as PartitionsApplied's in sync
    // mode) once it holds no lock a parked call's answer takes.
    if (a.opens_push) a.wake = TakeDueLocked(std::chrono::steady_clock::now());
    return a;
  }
  GivenUpPush& given_up = given_up_[static_cast<size_t>(header.worker())];
  if (given_up.step == step_ && header.step() == step_ &&
      header.num_chunks() == given_up.num_chunks && !given_up.seen[header.chunk()]) {
    // The rest of a push given up: admitting it would open a push whose earlier chunks are gone,
    // which could never complete and would hold the step until it expired too.
    given_up.seen[header.chunk()] = true;
    a.verdict = Verdict::kDropGivenUp;
    return a;
  }
  given_up.step = -1;
  if (absent_[static_cast<size_t>(header.worker())]) {
    // Back after its push was given up: it counts among the workers in the job again.
    absent_[static_cast<size_t>(header.worker())] = false;
    --absent_count_;
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
    push.opened = std::chrono::steady_clock::now();
    it = admitted_.emplace(header.worker(), std::move(push)).first;
  }
  it->second.seen[header.chunk()] = true;
  for (size_t p = 0; p < partitions; ++p) it->second.admitted_elements[p] += adding[p];
  a.verdict = Verdict::kAccumulate;
  return a;
}

bool StepCoordinator::AdmissionFinalLocked() const {
  // Closed once a partition went out: the workers admitted then are the step's, even if some
  // leave or come back afterwards (a worker given up and back cannot reopen it).
  if (applying_) return true;
  const int live = sync_.total_workers() - left_count_ - absent_count_;
  return !admitted_.empty() && static_cast<int>(admitted_.size()) >= std::min(required_, live);
}

void StepCoordinator::TakeReadyLocked(Progress& progress) {
  // With every admitted worker of a partly applied step gone, each partition still waiting is
  // "delivered" by none: it is handed out with no workers (no update) and the step completes.
  if (!AdmissionFinalLocked()) return;
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
}

StepCoordinator::Progress StepCoordinator::ChunkAccumulated(const proto::TransferHeader& header) {
  std::lock_guard lock(mu_);
  Progress progress;
  auto it = admitted_.find(header.worker());
  if (it == admitted_.end()) return progress;
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
  TakeReadyLocked(progress);
  return progress;
}

std::vector<StepCoordinator::OpenPush> StepCoordinator::open_pushes() const {
  std::lock_guard lock(mu_);
  std::vector<OpenPush> open;
  for (size_t w = 0; w < async_.size(); ++w) {
    if (!async_[w].open) continue;
    open.push_back(
        {static_cast<int>(w), async_[w].counted_at, async_[w].num_chunks - async_[w].chunks_in});
  }
  return open;
}

int StepCoordinator::workers_in_step() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(admitted_.size());
}

void StepCoordinator::Wake(Wakeups wakeups) {
  for (auto& [fn, reached] : wakeups) fn(reached);
}

StepCoordinator::Wakeups StepCoordinator::PartitionsApplied(const Progress& progress,
                                                            bool* completed_step) {
  std::lock_guard lock(mu_);
  for (uint32_t p : progress.apply) partition_state_[p] = PartitionState::kApplied;
  bool done = AdmissionFinalLocked();
  for (const auto& [worker, push] : admitted_) done = done && push.complete();
  for (PartitionState state : partition_state_) done = done && state == PartitionState::kApplied;
  if (done) {
    ++step_;
    StepMovedLocked();
    admitted_.clear();
    partition_state_.assign(partition_state_.size(), PartitionState::kWaiting);
    applying_ = false;
    completion_told_ = false;
  }
  if (completed_step != nullptr) *completed_step = done;
  if (!done && progress.apply.empty()) return {};
  return TakeDueLocked(std::chrono::steady_clock::now());
}

StepCoordinator::Progress StepCoordinator::Leave(int worker) {
  std::lock_guard lock(mu_);
  Progress progress;
  if (worker < 0 || static_cast<size_t>(worker) >= left_.size() || left_[worker]) return progress;
  left_[worker] = true;
  ++left_count_;
  if (!sync_.sync_replicas()) {
    if (async_[static_cast<size_t>(worker)].open) {
      async_[static_cast<size_t>(worker)].open = false;
      progress.given_up.push_back(worker);
    }
    return progress;
  }
  if (absent_[static_cast<size_t>(worker)]) {
    absent_[static_cast<size_t>(worker)] = false;  // counted as left now
    --absent_count_;
  }
  // A worker that leaves halfway through a push gives its place in the step back; its staged
  // pieces are never applied (the callers discard them).
  auto it = admitted_.find(worker);
  if (it != admitted_.end() && !it->second.complete()) {
    admitted_.erase(it);
    progress.given_up.push_back(worker);
  }
  TakeReadyLocked(progress);
  return progress;
}

StepCoordinator::Progress StepCoordinator::ExpirePushes() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  Progress progress;
  if (!sync_.sync_replicas()) {
    for (size_t w = 0; w < async_.size(); ++w) {
      if (async_[w].open && async_[w].opened + push_timeout_ <= now) {
        async_[w].open = false;
        progress.given_up.push_back(static_cast<int>(w));
      }
    }
    return progress;
  }
  for (auto it = admitted_.begin(); it != admitted_.end();) {
    if (it->second.complete() || it->second.opened + push_timeout_ > now) {
      ++it;
      continue;
    }
    progress.given_up.push_back(it->first);
    given_up_[static_cast<size_t>(it->first)] = {step_, it->second.num_chunks, it->second.seen};
    if (!absent_[static_cast<size_t>(it->first)] && !left_[static_cast<size_t>(it->first)]) {
      absent_[static_cast<size_t>(it->first)] = true;
      ++absent_count_;
    }
    it = admitted_.erase(it);
  }
  if (!progress.given_up.empty()) TakeReadyLocked(progress);
  return progress;
}

std::chrono::steady_clock::time_point StepCoordinator::NextPushDeadlineLocked() const {
  auto next = std::chrono::steady_clock::time_point::max();
  for (const auto& [worker, push] : admitted_) {
    if (!push.complete()) next = std::min(next, push.opened + push_timeout_);
  }
  for (const AsyncPush& push : async_) {
    if (push.open) next = std::min(next, push.opened + push_timeout_);
  }
  return next;
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
