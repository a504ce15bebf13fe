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

TEST(Backoff, NextDelayDoublesWithJitterUpToTheCapAndResetStartsOver) {
  Backoff b(milliseconds(100), milliseconds(400), Backoff::Clock::time_point::max());
  const int64_t expected_max[] = {100, 200, 400, 400};
  for (int64_t max : expected_max) {
    const std::optional<milliseconds> delay = b.NextDelay();
    ASSERT_TRUE(delay.has_value());
    EXPECT_GE(delay->count(), max / 2);
    EXPECT_LE(delay->count(), max);
  }
  EXPECT_EQ(b.attempts(), 4);
  b.Reset();
  EXPECT_EQ(b.attempts(), 0);
  const std::optional<milliseconds> delay = b.NextDelay();
  ASSERT_TRUE(delay.has_value());
  EXPECT_GE(delay->count(), 50);
  EXPECT_LE(delay->count(), 100);
}

TEST(Backoff, NextDelayIsNulloptPastTheDeadline) {
  Backoff b(milliseconds(5), milliseconds(5), Backoff::Clock::now() - milliseconds(1));
  EXPECT_FALSE(b.NextDelay().has_value());
  EXPECT_EQ(b.attempts(), 0);
}

}  // namespace
}  // namespace psflow
