#include "operator/kube/rate_limiter.h"

#include <algorithm>
#include <condition_variable>

namespace psflow::kube {
namespace {

class RealClock final : public LimiterClock {
 public:
  TimePoint Now() override { return std::chrono::steady_clock::now(); }

  bool SleepUntil(TimePoint deadline, std::stop_token stop) override {
    std::mutex mutex;
    std::condition_variable_any woken;
    std::unique_lock<std::mutex> lock(mutex);
    // Nothing notifies but stop: the wait ends at the deadline or on request_stop().
    woken.wait_until(lock, stop, deadline, [] { return false; });
    return !stop.stop_requested();
  }
};

}  // namespace

LimiterClock& LimiterClock::Real() {
  static LimiterClock* clock = new RealClock;
  return *clock;
}

RateLimiter::RateLimiter(double qps, int burst, LimiterClock* clock)
    : qps_(qps), burst_(std::max(burst, 1)), clock_(clock), tokens_(burst_), last_(clock->Now()) {}

bool RateLimiter::Wait(std::stop_token stop) {
  if (qps_ <= 0) return !stop.stop_requested();
  LimiterClock::TimePoint due;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const LimiterClock::TimePoint now = clock_->Now();
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    if (elapsed > 0) {
      tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
      last_ = now;
    }
    tokens_ -= 1;
    if (tokens_ >= 0) return true;
    // The token is due once the bucket has refilled what is owed.
    due = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(-tokens_ / qps_));
  }
  if (clock_->SleepUntil(due, stop)) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  tokens_ = std::min(burst_, tokens_ + 1);
  return false;
}

}  // namespace psflow::kube
