#include "worker/backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace psflow::cpu {
namespace {

// The ranges one For call hands out, and the threads that ran them.
struct Calls {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::set<std::thread::id> threads;
};

TEST(ThreadPool, RangesCoverEveryIndexOnceAndRespectTheGrain) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t n : {1, 2, 5, 7, 64, 1000}) {
      for (int64_t grain : {1, 3, 100}) {
        SCOPED_TRACE(testing::Message() << threads << " threads, n " << n << ", grain " << grain);
        std::vector<int> hits(static_cast<size_t>(n), 0);
        Calls calls;
        pool.For(n, grain, [&](int64_t begin, int64_t end) {
          std::lock_guard<std::mutex> lock(calls.mu);
          calls.ranges.emplace_back(begin, end);
          calls.threads.insert(std::this_thread::get_id());
          for (int64_t i = begin; i < end; ++i) ++hits[i];
        });
        for (int h : hits) ASSERT_EQ(h, 1);
        const int64_t expected_ranges = std::clamp<int64_t>(n / grain, 1, threads);
        EXPECT_EQ(static_cast<int64_t>(calls.ranges.size()), expected_ranges);
        EXPECT_EQ(static_cast<int64_t>(calls.threads.size()), expected_ranges);
        if (expected_ranges > 1) {
          for (auto [begin, end] : calls.ranges) EXPECT_GE(end - begin, grain);
        }
      }
    }
  }
}

TEST(ThreadPool, OneRangeRunsOnTheCallersThread) {
  ThreadPool pool(4);
  std::thread::id ran_on;
  pool.For(10, 8, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  pool.For(0, 1, [&](int64_t, int64_t) { ADD_FAILURE() << "called for an empty range"; });
}

TEST(ThreadPool, ManyCallsInARowSumExactly) {
  // Back-to-back jobs: a helper must neither miss one nor run one twice (TSan checks the rest).
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int call = 0; call < 2000; ++call) {
    pool.For(30, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) total += i;
    });
  }
  EXPECT_EQ(total.load(), 2000 * (29 * 30 / 2));
}

TEST(ThreadPool, NullPoolRunsInline) {
  int64_t seen = -1;
  ParallelFor(nullptr, 5, 1, [&](int64_t begin, int64_t end) { seen = end - begin; });
  EXPECT_EQ(seen, 5);
}

}  // namespace
}  // namespace psflow::cpu
