#include "operator/kube/rate_limiter.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace psflow::kube {
namespace {

using std::chrono::milliseconds;

// Time stands still until someone sleeps; each sleep is recorded and moves time on.
class FakeClock : public LimiterClock {
 public:
  TimePoint Now() override { return now_; }
  bool SleepUntil(TimePoint deadline, std::stop_token stop) override {
    if (stop.stop_requested()) return false;
    sleeps_.push_back(std::chrono::duration_cast<milliseconds>(deadline - now_));
    if (deadline > now_) now_ = deadline;
    return true;
  }
  void Advance(milliseconds d) { now_ += d; }
  const std::vector<milliseconds>& sleeps() const { return sleeps_; }

 private:
  TimePoint now_{};
  std::vector<milliseconds> sleeps_;
};

TEST(RateLimiter, BurstGoesAtOnceThenOneEveryOneOverQps) {
  FakeClock clock;
  RateLimiter limiter(/*qps=*/4, /*burst=*/3, &clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Wait());
  EXPECT_TRUE(clock.sleeps().empty());
  EXPECT_TRUE(limiter.Wait());
  EXPECT_TRUE(limiter.Wait());
  EXPECT_EQ(clock.sleeps(), (std::vector<milliseconds>{milliseconds(250), milliseconds(250)}));
}

TEST(RateLimiter, RefillsWhileIdleUpToTheBurst) {
  FakeClock clock;
  RateLimiter limiter(/*qps=*/10, /*burst=*/2, &clock);
  EXPECT_TRUE(limiter.Wait());
  EXPECT_TRUE(limiter.Wait());
  clock.Advance(milliseconds(10'000));  // would be 100 tokens; the bucket holds 2
  EXPECT_TRUE(limiter.Wait());
  EXPECT_TRUE(limiter.Wait());
  EXPECT_TRUE(clock.sleeps().empty());
  EXPECT_TRUE(limiter.Wait());
  ASSERT_EQ(clock.sleeps().size(), 1u);
  EXPECT_EQ(clock.sleeps()[0], milliseconds(100));
}

TEST(RateLimiter, PartialRefillShortensTheWait) {
  FakeClock clock;
  RateLimiter limiter(/*qps=*/2, /*burst=*/1, &clock);
  EXPECT_TRUE(limiter.Wait());
  clock.Advance(milliseconds(200));  // 0.4 of a token
  EXPECT_TRUE(limiter.Wait());
  ASSERT_EQ(clock.sleeps().size(), 1u);
  EXPECT_EQ(clock.sleeps()[0], milliseconds(300));
}

TEST(RateLimiter, QueuedWaitersAreDueOneAfterAnother) {
  // Reservations stack up: without time passing, the n-th extra request is due n/qps later.
  class NoSleepClock : public FakeClock {
   public:
    bool SleepUntil(TimePoint deadline, std::stop_token) override {
      due_.push_back(std::chrono::duration_cast<milliseconds>(deadline - Now()));
      return true;
    }
    std::vector<milliseconds> due_;
  } clock;
  RateLimiter limiter(/*qps=*/5, /*burst=*/1, &clock);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limiter.Wait());
  EXPECT_EQ(clock.due_,
            (std::vector<milliseconds>{milliseconds(200), milliseconds(400), milliseconds(600)}));
}

TEST(RateLimiter, StopEndsTheWaitAndGivesTheTokenBack) {
  FakeClock clock;
  RateLimiter limiter(/*qps=*/1, /*burst=*/1, &clock);
  EXPECT_TRUE(limiter.Wait());
  std::stop_source stop;
  stop.request_stop();
  EXPECT_FALSE(limiter.Wait(stop.get_token()));
  // The cancelled reservation is not owed: the next request waits one interval, not two.
  EXPECT_TRUE(limiter.Wait());
  ASSERT_EQ(clock.sleeps().size(), 1u);
  EXPECT_EQ(clock.sleeps()[0], milliseconds(1000));
}

TEST(RateLimiter, NonPositiveQpsIsUnlimited) {
  FakeClock clock;
  RateLimiter limiter(/*qps=*/0, /*burst=*/1, &clock);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(limiter.Wait());
  RateLimiter negative(/*qps=*/-1, /*burst=*/0, &clock);
  EXPECT_TRUE(negative.Wait());
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(RateLimiter, BurstBelowOneCountsAsOne) {
  FakeClock clock;
  RateLimiter limiter(/*qps=*/10, /*burst=*/0, &clock);
  EXPECT_TRUE(limiter.Wait());
  EXPECT_TRUE(clock.sleeps().empty());
  EXPECT_TRUE(limiter.Wait());
  EXPECT_EQ(clock.sleeps().size(), 1u);
}

TEST(RateLimiter, RealClockSleepEndsOnStop) {
  // Not a timing assertion: the wait is an hour long, so returning at all shows stop ended it.
  std::stop_source stop;
  std::thread stopper([&] { stop.request_stop(); });
  EXPECT_FALSE(LimiterClock::Real().SleepUntil(LimiterClock::Real().Now() + std::chrono::hours(1),
                                               stop.get_token()));
  stopper.join();
}

}  // namespace
}  // namespace psflow::kube
