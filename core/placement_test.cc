#include "core/placement.h"

#include <gtest/gtest.h>

namespace psflow {
namespace {

TEST(Placement, MlpVariablesOnOneTask) {
  auto p = PlaceVariables({{"w1", 313600}, {"b1", 400}, {"w2", 4000}, {"b2", 40}}, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->task_of, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(p->bytes_per_task, (std::vector<int64_t>{318040}));
}

TEST(Placement, BalancesByBytesLargestFirst) {
  // Greedy LPT: 8 -> t0, 7 -> t1, 6 -> t1? no: t1 has 7 < 8, so 6 -> t1 (13); 5 -> t0 (13).
  auto p = PlaceVariables({{"a", 5}, {"b", 6}, {"c", 7}, {"d", 8}}, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->task_of, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(p->bytes_per_task, (std::vector<int64_t>{13, 13}));
}

TEST(Placement, DeterministicUnderInputOrderForEqualSizes) {
  auto p1 = PlaceVariables({{"x", 4}, {"y", 4}}, 2);
  auto p2 = PlaceVariables({{"y", 4}, {"x", 4}}, 2);
  ASSERT_TRUE(p1.ok() && p2.ok());
  // "x" sorts first by name, so it lands on task 0 in both orders.
  EXPECT_EQ(p1->task_of, (std::vector<int>{0, 1}));
  EXPECT_EQ(p2->task_of, (std::vector<int>{1, 0}));
}

TEST(Placement, RejectsBadInput) {
  EXPECT_EQ(PlaceVariables({{"a", 1}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVariables({{"a", 1}, {"a", 2}}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psflow
