// A token bucket limiting the rate of API requests, as client-go's (qps, burst).
#ifndef PSFLOW_OPERATOR_KUBE_RATE_LIMITER_H_
#define PSFLOW_OPERATOR_KUBE_RATE_LIMITER_H_

#include <chrono>
#include <mutex>
#include <stop_token>

#include "absl/base/thread_annotations.h"

namespace psflow::kube {

// The time a RateLimiter reads and sleeps on; tests inject a fake one.
class LimiterClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~LimiterClock() = default;
  virtual TimePoint Now() = 0;
  // Sleeps until `deadline` or until `stop` is requested, whichever comes first. Returns false
  // when it woke because of `stop`.
  virtual bool SleepUntil(TimePoint deadline, std::stop_token stop) = 0;

  // The steady clock and a real sleep. Never destroyed.
  static LimiterClock& Real();
};

// The bucket holds up to `burst` tokens and refills at `qps` tokens a second; each request takes
// one, waiting for it when the bucket is empty. Waiters are served in the order they reserve.
// Thread-safe.
class RateLimiter {
 public:
  // qps <= 0: unlimited (Wait never waits). burst < 1 counts as 1. `clock` must outlive this.
  RateLimiter(double qps, int burst, LimiterClock* clock = &LimiterClock::Real());

  // Takes a token, sleeping until it is due. Returns false, having given the token back, when
  // `stop` is requested first.
  bool Wait(std::stop_token stop = {});

 private:
  const double qps_;
  const double burst_;
  LimiterClock* const clock_;
  std::mutex mutex_;
  double tokens_ ABSL_GUARDED_BY(mutex_);  // negative: owed to reservations not yet due
  LimiterClock::TimePoint last_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_RATE_LIMITER_H_
