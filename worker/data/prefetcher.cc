#include "worker/data/prefetcher.h"

#include <cassert>
#include <chrono>

namespace psflow::data {

Prefetcher::Prefetcher(std::unique_ptr<BatchSource> source, int depth)
    : source_(std::move(source)),
      batches_per_epoch_(source_->batches_per_epoch()),
      ring_(static_cast<size_t>(std::max(depth, 1) + 1)),
      thread_([this] { Run(); }) {}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  freed_cv_.notify_all();
  thread_.join();
}

void Prefetcher::Run() {
  const auto slots = static_cast<int64_t>(ring_.size());
  for (;;) {
    int64_t slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // The consumer holds batch consumed_ - 1 until its next call: never overwrite it.
      freed_cv_.wait(lock, [&] { return stop_ || produced_ - (consumed_ - 1) < slots; });
      if (stop_) return;
      slot = produced_ % slots;
    }
    source_->Fill(ring_[static_cast<size_t>(slot)]);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++produced_;
    }
    filled_cv_.notify_one();
  }
}

void Prefetcher::WaitFor(std::unique_lock<std::mutex>& lock, int64_t index) {
  if (produced_ > index) return;
  const auto start = std::chrono::steady_clock::now();
  filled_cv_.wait(lock, [&] { return produced_ > index; });
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

nn::Batch Prefetcher::Peek(int ahead) {
  assert(ahead >= 0 && ahead < depth());
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t index = consumed_ + ahead;
  WaitFor(lock, index);
  return ring_[static_cast<size_t>(index % static_cast<int64_t>(ring_.size()))].view();
}

nn::Batch Prefetcher::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  WaitFor(lock, consumed_);
  const int64_t slot = consumed_ % static_cast<int64_t>(ring_.size());
  ++consumed_;  // also releases the batch handed out before this one
  lock.unlock();
  freed_cv_.notify_one();
  return ring_[static_cast<size_t>(slot)].view();
}

}  // namespace psflow::data
