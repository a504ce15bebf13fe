// Exponential backoff with jitter (each delay drawn from [d/2, d]), bounded by a deadline:
// psflow's one retry policy for UNAVAILABLE / DEADLINE_EXCEEDED while connecting. (Pull/Push
// during training do not retry yet: a ps that goes away ends the worker with a clear error.)
#ifndef PSFLOW_CORE_BACKOFF_H_
#define PSFLOW_CORE_BACKOFF_H_

#include <chrono>
#include <optional>
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
  // The delay Wait() would sleep, without sleeping (counted as an attempt): for callers whose
  // sleep must end early on a stop request. nullopt once the deadline has passed.
  std::optional<std::chrono::milliseconds> NextDelay();
  // After a success: the next delay is `initial` again and attempts() is 0.
  void Reset();
  int attempts() const { return attempts_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds next_;
  std::chrono::milliseconds max_;
  Clock::time_point deadline_;
  int attempts_ = 0;
  std::minstd_rand rng_;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_BACKOFF_H_
