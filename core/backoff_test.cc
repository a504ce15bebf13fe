#include "core/backoff.h"

#include <gtest/gtest.h>

namespace psflow {
namespace {

using std::chrono::milliseconds;

TEST(Backoff, StopsAtDeadlineAndNeverSleepsPastIt) {
  const auto start = Backoff::Clock::now();
  Backoff b(milliseconds(5), milliseconds(20), start + milliseconds(60));
  while (b.Wait()) {
  }
  const auto elapsed = Backoff::Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(60));
  // 5/2..5, then delays of at most 20 ms: at least 3 attempts fit in 60 ms.
  EXPECT_GE(b.attempts(), 3);
}

TEST(Backoff, ExpiredDeadlineMeansNoAttempt) {
  Backoff b(milliseconds(5), milliseconds(5), Backoff::Clock::now() - milliseconds(1));
  EXPECT_FALSE(b.Wait());
  EXPECT_EQ(b.attempts(), 0);
}

}  // namespace
}  // namespace psflow
