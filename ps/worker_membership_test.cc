#include "ps/worker_membership.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace psflow {
namespace {

using Kind = MembershipChange::Kind;
using State = WorkerMembership::State;

TEST(WorkerMembership, TheInitialWorkersAreMembers) {
  WorkerMembership m(3);
  EXPECT_EQ(m.members(), 3);
  EXPECT_EQ(m.state(0), State::kMember);
  EXPECT_EQ(m.state(2), State::kMember);
  EXPECT_EQ(m.state(3), State::kNone);
  EXPECT_EQ(m.state(-1), State::kNone);
  EXPECT_TRUE(m.TakeChanges().empty());
}

TEST(WorkerMembership, OfExactlyTheGivenWorkers) {
  const WorkerMembership m = WorkerMembership::Of({4, 0, 4, -1, kMaxWorkers});
  EXPECT_EQ(m.members(), 2);
  EXPECT_EQ(m.Members(), (std::vector<int>{0, 4}));
  EXPECT_EQ(m.state(1), State::kNone);
  EXPECT_TRUE(WorkerMembership::Of({}).Members().empty());
  EXPECT_EQ(WorkerMembership(3).Members(), (std::vector<int>{0, 1, 2}));
}

TEST(WorkerMembership, JoinsLeavesAndWaitingJoins) {
  struct Row {
    std::string op;  // "join", "wait", "boundary", "leave"
    int worker;
    bool returns;  // join/wait/leave: what the call returned; boundary: someone joined
    int members_after;
  };
  const std::vector<Row> rows = {
      {"join", 1, false, 2},      // already a member
      {"join", 4, true, 3},       // async: a new worker counts at once
      {"wait", 5, true, 3},       // sync: it counts from the next step
      {"wait", 5, false, 3},      // already waiting
      {"wait", 0, false, 3},      // a member does not wait
      {"boundary", 0, true, 4},   // 5 joins
      {"boundary", 0, false, 4},  // nobody waiting
      {"leave", 0, true, 3},
      {"leave", 0, false, 3},  // once
      {"wait", 0, true, 3},    // it comes back (a restarted pod)
      {"leave", 0, true, 3},   // leaves before the boundary: never counted
      {"leave", 9, true, 3},   // never seen: recorded as left, no change
      {"join", kMaxWorkers, false, 3},
      {"wait", -1, false, 3},
      {"leave", kMaxWorkers, false, 3},
  };
  WorkerMembership m(2);
  int64_t step = 0;
  for (const Row& r : rows) {
    ++step;
    bool got = false;
    if (r.op == "join") got = m.Join(r.worker, step);
    if (r.op == "wait") got = m.MarkJoining(r.worker, step);
    if (r.op == "boundary") got = !m.JoinWaiting(step).empty();
    if (r.op == "leave") got = m.Leave(r.worker, step);
    EXPECT_EQ(got, r.returns) << r.op << " " << r.worker << " at " << step;
    EXPECT_EQ(m.members(), r.members_after) << r.op << " " << r.worker << " at " << step;
  }
  const std::vector<MembershipChange> expected = {
      {Kind::kJoined, 4, 2, 3}, {Kind::kJoining, 5, 3, 3},  {Kind::kJoined, 5, 6, 4},
      {Kind::kLeft, 0, 8, 3},   {Kind::kJoining, 0, 10, 3}, {Kind::kLeft, 0, 11, 3},
  };
  EXPECT_EQ(m.TakeChanges(), expected);
  EXPECT_TRUE(m.TakeChanges().empty());
  EXPECT_EQ(m.state(9), State::kLeft);
  EXPECT_EQ(m.state(0), State::kLeft);
}

}  // namespace
}  // namespace psflow
