// The steps a time budget lets a trainer run, row by row.
#include "worker/time_budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace psflow {
namespace {

struct Row {
  const char* what;
  int64_t total, done;
  double elapsed_s, budget_s;
  int64_t expected;
};

TEST(TimeBudget, StepsWithinBudget) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Row rows[] = {
      {"no budget", 1000, 10, 1.0, 0, 1000},
      {"negative budget", 1000, 10, 1.0, -1, 1000},
      {"NaN budget", 1000, 10, 1.0, nan, 1000},
      {"no step yet", 1000, 0, 0.5, 20, 1000},
      {"no time yet", 1000, 10, 0, 20, 1000},
      {"10 steps/s, 9 s left", 1000, 10, 1.0, 10, 100},
      {"rounded down", 1000, 10, 3.0, 10, 33},  // 10 + 3.33 x 7 = 33.3
      {"the total first", 1000, 500, 1.0, 10, 1000},
      {"exactly the total", 100, 10, 1.0, 10, 100},
      {"over budget: what is done", 1000, 10, 12.0, 10, 10},
      {"a huge rate", std::numeric_limits<int64_t>::max(), 1, 1e-300, 10,
       std::numeric_limits<int64_t>::max()},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    EXPECT_EQ(StepsWithinBudget(r.total, r.done, r.elapsed_s, r.budget_s), r.expected);
  }
}

}  // namespace
}  // namespace psflow
