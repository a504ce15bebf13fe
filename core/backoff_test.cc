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
  // Delays of at most 5, 10, 20 ms: even with sanitizers' oversleeping, more than one fits.
  EXPECT_GE(b.attempts(), 2);
}

TEST(Backoff, ExpiredDeadlineMeansNoAttempt) {
  Backoff b(milliseconds(5), milliseconds(5), Backoff::Clock::now() - milliseconds(1));
  EXPECT_FALSE(b.Wait());
  EXPECT_EQ(b.attempts(), 0);
}

}  // namespace
}  // namespace psflow
