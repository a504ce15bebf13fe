#include "ps/sync_step_rules.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace psflow {

using step_rules::Admission;
using step_rules::Clock;
using step_rules::Progress;
using step_rules::Verdict;

SyncStepRules::SyncStepRules(const proto::SyncConfig& sync, int64_t step,
                             std::vector<int64_t> partition_elements, WorkerMembership counted)
    : required_(sync.replicas_to_aggregate()),
      partition_elements_(std::move(partition_elements)),
      step_(std::max<int64_t>(step, 0)),
      partition_state_(partition_elements_.size(), PartitionState::kWaiting),
      membership_(std::move(counted)) {
  GrowTo(sync.total_workers() - 1);
}

void SyncStepRules::GrowTo(int worker) {
  const auto n = static_cast<size_t>(worker) + 1;
  if (absent_.size() >= n) return;
  absent_.resize(n, false);
  given_up_step_.resize(n, -1);
}

std::vector<int> SyncStepRules::counted_workers() const {
  std::vector<int> counted = membership_.Members();
  std::erase_if(counted, [this](int w) {
    return static_cast<size_t>(w) < absent_.size() && absent_[static_cast<size_t>(w)];
  });
  return counted;
}

int SyncStepRules::contributions_needed() const {
  // A worker that left after its push of this step was complete still counts in this step.
  int live = workers();
  for (const auto& [worker, push] : admitted_) {
    if (!membership_.member(worker)) ++live;
  }
  return required_ == 0 ? live : std::min(required_, live);
}

bool SyncStepRules::applied(uint32_t p) const {
  return p < partition_state_.size() && partition_state_[p] == PartitionState::kApplied;
}

absl::StatusOr<Admission> SyncStepRules::Admit(const proto::TransferHeader& header,
                                               Clock::time_point now) {
  RETURN_IF_ERROR(step_rules::CheckPushHeader(header, step_));
  Admission a;
  a.step = step_;
  a.staleness = step_ - header.step();
  GrowTo(header.worker());
  const auto worker = static_cast<size_t>(header.worker());
  int64_t& given_up_step = given_up_step_[worker];
  if (given_up_step == step_ && header.step() == step_) {
    // More of a push given up, late or sent again by its restarted worker: the given-up push
    // stands for the step, as a first push does (kDropRepeated). Admitting it would open a push
    // whose earlier chunks may never come again (which chunks a restart resends first depends on
    // the order they arrive in), holding the step until it expired too.
    a.verdict = Verdict::kDropGivenUp;
    return a;
  }
  // A chunk of an older step changes nothing, whoever sent it: a late chunk of a push given up or
  // of a worker that left is no sign that its worker is back.
  if (header.step() < step_) {
    a.verdict = Verdict::kDropStale;
    return a;
  }
  // A push of the current step that is not refused: its worker is in the job. Called once the
  // chunk is known not to be refused (a refusal changes nothing).
  const auto back = [&] {
    given_up_step = -1;
    if (absent_[worker]) {
      // Back after its push was given up: it counts among the workers in the job again.
      absent_[worker] = false;
      --absent_count_;
    }
  };
  const bool member = membership_.member(header.worker());
  if (!member && step_started_) {
    // A new worker, or one back after leaving, mid-step: it counts from the next step on (its
    // next pull waits for that step), so its chunks of this step are dropped. Between steps it
    // joins as its push is admitted (below).
    back();
    membership_.MarkJoining(header.worker(), step_);
    a.verdict = Verdict::kDropJoining;
    return a;
  }
  auto it = admitted_.find(header.worker());
  if (it == admitted_.end()) {
    if (closed_ || (required_ > 0 && static_cast<int>(admitted_.size()) >= required_)) {
      back();
      a.verdict = Verdict::kDropBackup;
      return a;
    }
  } else if (it->second.num_chunks != header.num_chunks() || it->second.seen[header.chunk()]) {
    // The worker restarted and pushes this step again: its first push stands (as it is, or
    // given up if it stays incomplete); the repeat changes nothing.
    a.verdict = Verdict::kDropRepeated;
    return a;
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
  back();
  if (it == admitted_.end()) {
    if (!member) membership_.Join(header.worker(), step_);
    step_started_ = true;
    WorkerPush push;
    push.num_chunks = header.num_chunks();
    push.seen.assign(header.num_chunks(), false);
    push.admitted_elements.assign(partitions, 0);
    push.staged_elements.assign(partitions, 0);
    push.delivered.assign(partitions, false);
    push.opened = now;
    it = admitted_.emplace(header.worker(), std::move(push)).first;
  }
  it->second.seen[header.chunk()] = true;
  for (size_t p = 0; p < partitions; ++p) it->second.admitted_elements[p] += adding[p];
  a.verdict = Verdict::kAccumulate;
  return a;
}

bool SyncStepRules::AdmissionFinal() const {
  // Closed once a partition went out: the workers admitted then are the step's, even if some
  // leave or come back afterwards (a worker given up and back cannot reopen it).
  if (closed_) return true;
  // Every admitted push of a started step gone (left, given up) and nobody else counted: the
  // step completes with no update.
  if (admitted_.empty()) return step_started_ && contributions_needed() == 0;
  return workers_in_step() >= contributions_needed();
}

void SyncStepRules::TakeReady(Progress& progress) {
  // With every admitted worker of a partly applied step gone, each partition still waiting is
  // "delivered" by none: it is handed out with no workers (no update) and the step completes.
  if (!AdmissionFinal()) return;
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
  // Said once per step; admission closes with it, as with the first partition handed out.
  progress.completes_step = complete && !pending && !completion_told_;
  completion_told_ = completion_told_ || progress.completes_step;
  if (!progress.apply.empty() || progress.completes_step) closed_ = true;
}

Progress SyncStepRules::Staged(const proto::TransferHeader& header) {
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
  TakeReady(progress);
  return progress;
}

bool SyncStepRules::Applied(const Progress& progress) {
  for (uint32_t p : progress.apply) partition_state_[p] = PartitionState::kApplied;
  bool done = AdmissionFinal();
  for (const auto& [worker, push] : admitted_) done = done && push.complete();
  for (PartitionState state : partition_state_) done = done && state == PartitionState::kApplied;
  if (!done) return false;
  ++step_;
  admitted_.clear();
  membership_.JoinWaiting(step_);
  partition_state_.assign(partition_state_.size(), PartitionState::kWaiting);
  closed_ = false;
  completion_told_ = false;
  step_started_ = false;
  return true;
}

Progress SyncStepRules::Leave(int worker) {
  Progress progress;
  if (!membership_.Leave(worker, step_)) return progress;
  GrowTo(worker);
  if (absent_[worker]) {
    absent_[worker] = false;  // counted as left now
    --absent_count_;
  }
  // A worker that leaves halfway through a push gives its place in the step back; its staged
  // pieces are never applied (the callers discard them).
  auto it = admitted_.find(worker);
  if (it != admitted_.end() && !it->second.complete()) {
    admitted_.erase(it);
    progress.given_up.push_back(worker);
  }
  TakeReady(progress);
  return progress;
}

Progress SyncStepRules::Expire(Clock::time_point now, Clock::duration timeout) {
  Progress progress;
  for (auto it = admitted_.begin(); it != admitted_.end();) {
    if (it->second.complete() || it->second.opened + timeout > now) {
      ++it;
      continue;
    }
    const auto worker = static_cast<size_t>(it->first);
    progress.given_up.push_back(it->first);
    given_up_step_[worker] = step_;
    if (!absent_[worker] && membership_.member(it->first)) {
      absent_[worker] = true;
      ++absent_count_;
    }
    it = admitted_.erase(it);
  }
  if (!progress.given_up.empty()) TakeReady(progress);
  return progress;
}

Clock::time_point SyncStepRules::NextPushDeadline(Clock::duration timeout) const {
  auto next = Clock::time_point::max();
  for (const auto& [worker, push] : admitted_) {
    if (!push.complete()) next = std::min(next, push.opened + timeout);
  }
  return next;
}

}  // namespace psflow
