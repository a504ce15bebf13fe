#include "ps/worker_membership.h"

#include <algorithm>
#include <utility>

namespace psflow {
namespace {

bool InRange(int worker) { return worker >= 0 && worker < kMaxWorkers; }

}  // namespace

WorkerMembership::WorkerMembership(int initial)
    : state_(static_cast<size_t>(std::clamp(initial, 0, kMaxWorkers)), State::kMember),
      members_(static_cast<int>(state_.size())) {}

WorkerMembership WorkerMembership::Of(const std::vector<int>& workers) {
  WorkerMembership m(0);
  for (int w : workers) {
    if (!InRange(w) || m.StateOf(w) == State::kMember) continue;
    m.StateOf(w) = State::kMember;
    ++m.members_;
  }
  return m;
}

std::vector<int> WorkerMembership::Members() const {
  std::vector<int> members;
  for (size_t w = 0; w < state_.size(); ++w) {
    if (state_[w] == State::kMember) members.push_back(static_cast<int>(w));
  }
  return members;
}

WorkerMembership::State WorkerMembership::state(int worker) const {
  if (worker < 0 || static_cast<size_t>(worker) >= state_.size()) return State::kNone;
  return state_[static_cast<size_t>(worker)];
}

WorkerMembership::State& WorkerMembership::StateOf(int worker) {
  const auto w = static_cast<size_t>(worker);
  if (w >= state_.size()) state_.resize(w + 1, State::kNone);
  return state_[w];
}

bool WorkerMembership::Join(int worker, int64_t step) {
  if (!InRange(worker)) return false;
  State& s = StateOf(worker);
  if (s == State::kMember) return false;
  s = State::kMember;
  ++members_;
  changes_.push_back({MembershipChange::Kind::kJoined, worker, step, members_});
  return true;
}

bool WorkerMembership::MarkJoining(int worker, int64_t step) {
  if (!InRange(worker)) return false;
  State& s = StateOf(worker);
  if (s == State::kMember || s == State::kJoining) return false;
  s = State::kJoining;
  changes_.push_back({MembershipChange::Kind::kJoining, worker, step, members_});
  return true;
}

std::vector<int> WorkerMembership::JoinWaiting(int64_t step) {
  std::vector<int> joined;
  for (size_t w = 0; w < state_.size(); ++w) {
    if (state_[w] != State::kJoining) continue;
    state_[w] = State::kMember;
    ++members_;
    joined.push_back(static_cast<int>(w));
    changes_.push_back({MembershipChange::Kind::kJoined, static_cast<int>(w), step, members_});
  }
  return joined;
}

bool WorkerMembership::Leave(int worker, int64_t step) {
  if (!InRange(worker)) return false;
  State& s = StateOf(worker);
  if (s == State::kLeft) return false;
  const bool was_member = s == State::kMember;
  const bool was_waiting = s == State::kJoining;
  s = State::kLeft;
  if (was_member) --members_;
  if (was_member || was_waiting) {
    changes_.push_back({MembershipChange::Kind::kLeft, worker, step, members_});
  }
  return true;
}

std::vector<MembershipChange> WorkerMembership::TakeChanges() {
  return std::exchange(changes_, {});
}

}  // namespace psflow
