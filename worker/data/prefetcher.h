// Runs a BatchSource on a background thread, `depth` batches ahead of the training step, so
// input preparation (shuffling, copying, augmentation) overlaps compute and communication.
#ifndef PSFLOW_WORKER_DATA_PREFETCHER_H_
#define PSFLOW_WORKER_DATA_PREFETCHER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "worker/data/batch_source.h"

namespace psflow::data {

class Prefetcher {
 public:
  // Starts filling at once. depth >= 1.
  explicit Prefetcher(std::unique_ptr<BatchSource> source, int depth = 2);
  // Stops the thread (after the fill in progress, if any).
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int depth() const { return static_cast<int>(ring_.size()) - 1; }

  // The source's next batch, in its order; valid until the next call. Blocks only when the
  // source is slower than the consumer. One consumer thread.
  nn::Batch Next();

  // The batch the (ahead + 1)-th next call of Next() will return, without taking it (0: the next
  // one); ahead in [0, depth()). Valid until that batch has been taken and the call after it
  // made. Blocks as Next() does (the wait counts in wait_seconds). One consumer thread.
  nn::Batch Peek(int ahead);

  // Seconds Next() and Peek() have spent waiting for the source: > 0 means input-bound.
  double wait_seconds() const { return wait_seconds_; }

 private:
  void Run();
  // Waits (counted in wait_seconds_) until batch `index` has been produced.
  void WaitFor(std::unique_lock<std::mutex>& lock, int64_t index);

  std::unique_ptr<BatchSource> source_;
  const int64_t batches_per_epoch_;
  std::vector<BatchBuffer> ring_;  // depth + 1: `depth` ahead and the one the consumer holds
  std::mutex mu_;
  std::condition_variable filled_cv_;
  std::condition_variable freed_cv_;
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;  // batches handed out
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  double wait_seconds_ = 0;
  std::thread thread_;
};

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_PREFETCHER_H_
