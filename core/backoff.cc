#include "core/backoff.h"

#include <algorithm>
#include <thread>

namespace psflow {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max_delay,
                 Clock::time_point deadline)
    : initial_(initial),
      next_(initial),
      max_(max_delay),
      deadline_(deadline),
      rng_(std::random_device{}()) {}

bool Backoff::Wait() {
  const std::optional<std::chrono::milliseconds> delay = NextDelay();
  if (!delay.has_value()) return false;
  std::this_thread::sleep_for(*delay);
  return true;
}

std::optional<std::chrono::milliseconds> Backoff::NextDelay() {
  const auto now = Clock::now();
  if (now >= deadline_) return std::nullopt;
  ++attempts_;
  // Jitter in [next/2, next] keeps workers that failed together from retrying together.
  std::uniform_int_distribution<int64_t> dist(next_.count() / 2, next_.count());
  auto delay = std::chrono::milliseconds(dist(rng_));
  delay = std::min(delay, std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now));
  next_ = std::min(next_ * 2, max_);
  return delay;
}

void Backoff::Reset() {
  next_ = initial_;
  attempts_ = 0;
}

}  // namespace psflow
