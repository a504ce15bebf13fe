#include "worker/backend/cpu/thread_pool.h"

#include <algorithm>

namespace psflow::cpu {
namespace {

// Range `i` of `ranges` equal parts of [0, n).
std::pair<int64_t, int64_t> Range(int64_t n, int ranges, int i) {
  return {n * i / ranges, n * (i + 1) / ranges};
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this, i] { Help(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void ThreadPool::For(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  const int ranges =
      static_cast<int>(std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, threads()));
  if (ranges == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    n_ = n;
    ranges_ = ranges;
    pending_ = ranges - 1;
    fn_ = &fn;
  }
  work_ready_.notify_all();
  const auto [begin, end] = Range(n, ranges, 0);
  fn(begin, end);
  std::unique_lock<std::mutex> lock(mu_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::Help(int index) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_ready_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= ranges_) continue;
    const auto [begin, end] = Range(n_, ranges_, index);
    const auto* fn = fn_;
    lock.unlock();
    (*fn)(begin, end);
    lock.lock();
    if (--pending_ == 0) work_done_.notify_one();
  }
}

}  // namespace psflow::cpu
