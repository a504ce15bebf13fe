// The threads the CPU backend's own loops split their work over (im2col, pooling, LRN, the LSTM
// cell, softmax); matrix products use OpenBLAS's pool (blas.h), set to the same count. Waiting
// threads sleep on a condition variable: they leave the cores to OpenBLAS's threads between
// loops.
#ifndef PSFLOW_WORKER_BACKEND_CPU_THREAD_POOL_H_
#define PSFLOW_WORKER_BACKEND_CPU_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"

namespace psflow::cpu {

class ThreadPool {
 public:
  // `threads` >= 1 workers in all: the caller of For and threads - 1 helpers.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges that cover [0, n), at most threads() of them and
  // each at least `grain` long (one range when n < 2 * grain), the calling thread taking the
  // first; returns when every call has returned. One For at a time (the backend runs one layer
  // at a time); fn must not call For.
  void For(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  void Help(int index);

  std::vector<std::thread> helpers_;
  std::mutex mu_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  // The current For's job, numbered so that each helper takes each job once.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t n_ ABSL_GUARDED_BY(mu_) = 0;
  int ranges_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // helpers' ranges not yet done
  const absl::FunctionRef<void(int64_t, int64_t)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// pool->For(n, grain, fn), or fn(0, n) on this thread when pool is null.
inline void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain,
                        absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->For(n, grain, fn);
}

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_THREAD_POOL_H_
