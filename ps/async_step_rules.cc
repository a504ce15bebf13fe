#include "ps/async_step_rules.h"

#include <algorithm>

#include "core/status_macros.h"

namespace psflow {

using step_rules::Admission;
using step_rules::Clock;
using step_rules::Progress;

AsyncStepRules::AsyncStepRules(WorkerMembership counted, int64_t step)
    : step_(std::max<int64_t>(step, 0)), membership_(std::move(counted)) {}

absl::StatusOr<Admission> AsyncStepRules::Admit(const proto::TransferHeader& header,
                                                Clock::time_point now) {
  RETURN_IF_ERROR(step_rules::CheckPushHeader(header, step_));
  Admission a;
  if (static_cast<size_t>(header.worker()) >= pushes_.size()) {
    pushes_.resize(static_cast<size_t>(header.worker()) + 1);
  }
  Push& push = pushes_[static_cast<size_t>(header.worker())];
  if (push.given_up && push.from_step == header.step() && push.num_chunks == header.num_chunks() &&
      !push.seen[header.chunk()]) {
    push.seen[header.chunk()] = true;
    a.verdict = step_rules::Verdict::kDropGivenUp;
    a.step = step_;
    return a;
  }
  membership_.Join(header.worker(), step_);
  if (!push.open || push.from_step != header.step() || push.num_chunks != header.num_chunks() ||
      push.seen[header.chunk()]) {
    // A new push (one this worker left open ends as it is: it restarted).
    push.open = true;
    push.given_up = false;
    push.from_step = header.step();
    push.counted_at = step_;
    push.num_chunks = header.num_chunks();
    push.chunks_in = 0;
    push.seen.assign(header.num_chunks(), false);
    push.opened = now;
    a.opens_push = true;
    ++step_;
  }
  push.seen[header.chunk()] = true;
  a.step = push.counted_at;
  a.staleness = push.counted_at - header.step();
  if (++push.chunks_in == push.num_chunks) {
    push.open = false;
    a.closes_push = true;
  }
  return a;
}

Progress AsyncStepRules::Leave(int worker) {
  Progress progress;
  if (!membership_.Leave(worker, step_)) return progress;
  if (static_cast<size_t>(worker) < pushes_.size() && pushes_[static_cast<size_t>(worker)].open) {
    pushes_[static_cast<size_t>(worker)].open = false;
    pushes_[static_cast<size_t>(worker)].given_up = true;
    progress.given_up.push_back(worker);
  }
  return progress;
}

Progress AsyncStepRules::Expire(Clock::time_point now, Clock::duration timeout) {
  Progress progress;
  for (size_t w = 0; w < pushes_.size(); ++w) {
    if (pushes_[w].open && pushes_[w].opened + timeout <= now) {
      pushes_[w].open = false;
      pushes_[w].given_up = true;
      progress.given_up.push_back(static_cast<int>(w));
    }
  }
  return progress;
}

std::vector<step_rules::OpenPush> AsyncStepRules::open_pushes() const {
  std::vector<step_rules::OpenPush> open;
  for (size_t w = 0; w < pushes_.size(); ++w) {
    if (!pushes_[w].open) continue;
    open.push_back(
        {static_cast<int>(w), pushes_[w].counted_at, pushes_[w].num_chunks - pushes_[w].chunks_in});
  }
  return open;
}

Clock::time_point AsyncStepRules::NextPushDeadline(Clock::duration timeout) const {
  auto next = Clock::time_point::max();
  for (const Push& push : pushes_) {
    if (push.open) next = std::min(next, push.opened + timeout);
  }
  return next;
}

}  // namespace psflow
