#include "operator/local/restart_backoff.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace psflow::local {
namespace {

TEST(RestartBackoff, OnlyQuickFailuresInARowWaitAndTheWaitDoublesUpToItsCap) {
  const std::vector<std::pair<int, int64_t>> rows = {
      {0, 0},  // the run lasted: at once
      {1, 0},  // one quick failure: at once
      {2, 250},  {3, 500},   {4, 1000},  {5, 2000},     {6, 4000},
      {7, 8000}, {8, 10000}, {9, 10000}, {1000, 10000},  // no overflow however long it loops
  };
  for (const auto& [quick_runs, ms] : rows) {
    EXPECT_EQ(RestartDelay(quick_runs), std::chrono::milliseconds(ms)) << quick_runs;
  }
}

}  // namespace
}  // namespace psflow::local
