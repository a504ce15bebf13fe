// Exponential backoff with full jitter, bounded by a deadline: the one retry policy of psflow's
// clients for UNAVAILABLE / DEADLINE_EXCEEDED errors.
#ifndef PSFLOW_CORE_BACKOFF_H_
#define PSFLOW_CORE_BACKOFF_H_

#include <chrono>
#include <random>

namespace psflow {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  // Delays grow initial, 2*initial, ... up to max_delay; Wait() gives up once `deadline` passes.
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max_delay,
          Clock::time_point deadline);

  // Sleeps for the next delay (never past the deadline). Returns false, without sleeping, when
  // the deadline has already passed: the caller stops retrying.
  bool Wait();
  int attempts() const { return attempts_; }

 private:
  std::chrono::milliseconds next_;
  std::chrono::milliseconds max_;
  Clock::time_point deadline_;
  int attempts_ = 0;
  std::minstd_rand rng_;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_BACKOFF_H_
