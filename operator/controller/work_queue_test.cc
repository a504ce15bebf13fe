#include "operator/controller/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace psflow::controller {
namespace {

using std::chrono::milliseconds;

// A clock that moves only when the test says so.
class FakeClock {
 public:
  WorkQueue::TimePoint Now() const { return WorkQueue::TimePoint(milliseconds(now_ms_.load())); }
  void Advance(milliseconds d) { now_ms_ += d.count(); }
  std::function<WorkQueue::TimePoint()> AsFunction() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<int64_t> now_ms_{1000000};
};

WorkQueue::Options FakeClockOptions(FakeClock& clock, milliseconds base = milliseconds(5),
                                    milliseconds max = milliseconds(300000)) {
  WorkQueue::Options options;
  options.base_delay = base;
  options.max_delay = max;
  options.now = clock.AsFunction();
  return options;
}

TEST(WorkQueue, AKeyAddedTwiceIsQueuedOnceAndKeysComeOutInOrder) {
  WorkQueue queue;
  queue.Add("ns/b");
  queue.Add("ns/a");
  queue.Add("ns/b");
  queue.Add("ns/c");
  EXPECT_EQ(queue.Depth(), 3u);
  EXPECT_EQ(queue.Get(), "ns/b");
  EXPECT_EQ(queue.Get(), "ns/a");
  EXPECT_EQ(queue.Get(), "ns/c");
  EXPECT_EQ(queue.Depth(), 0u);
}

TEST(WorkQueue, AKeyAddedWhileProcessingIsHandedOutAgainOnlyAfterDone) {
  WorkQueue queue;
  queue.Add("a");
  ASSERT_EQ(queue.Get(), "a");
  queue.Add("a");
  queue.Add("a");
  EXPECT_EQ(queue.Depth(), 0u);  // held back while its worker has it
  queue.Done("a");
  EXPECT_EQ(queue.Depth(), 1u);
  EXPECT_EQ(queue.Get(), "a");
  queue.Done("a");
  EXPECT_EQ(queue.Depth(), 0u);  // not added since the last Get: gone
}

TEST(WorkQueue, DoneForAKeyNotBeingProcessedChangesNothing) {
  WorkQueue queue;
  queue.Add("a");
  queue.Done("a");
  queue.Done("b");
  EXPECT_EQ(queue.Depth(), 1u);
  EXPECT_EQ(queue.Get(), "a");
}

// Many producers and workers on a few keys: no key is ever held by two workers at once, and
// every key is handed out at least once after its last Add (nothing is lost).
TEST(WorkQueue, NoKeyIsProcessedByTwoWorkersAtOnceAndNoAddIsLost) {
  constexpr int kKeys = 8;
  constexpr int kProducers = 4;
  constexpr int kWorkers = 4;
  constexpr int kAddsPerProducer = 3000;
  WorkQueue queue;
  std::atomic<int64_t> clock{0};  // orders Adds and Gets
  std::mutex mu;
  std::set<std::string> in_flight;          // guarded by mu
  int violations = 0;                       // guarded by mu
  std::map<std::string, int64_t> last_add;  // guarded by mu
  std::map<std::string, int64_t> last_get;  // guarded by mu
  std::atomic<int64_t> gets{0};

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (std::optional<std::string> key = queue.Get()) {
        const int64_t at = ++clock;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!in_flight.insert(*key).second) ++violations;
          last_get[*key] = std::max(last_get[*key], at);
        }
        ++gets;
        std::this_thread::yield();
        {
          std::lock_guard<std::mutex> lock(mu);
          in_flight.erase(*key);
        }
        queue.Done(*key);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kAddsPerProducer; ++i) {
        const std::string key = "k" + std::to_string((i * 7 + p) % kKeys);
        {
          std::lock_guard<std::mutex> lock(mu);
          last_add[key] = ++clock;  // taken before Add: the Get that follows is later
        }
        queue.Add(key);
      }
    });
  }
  for (std::thread& t : producers) t.join();
  queue.ShutDown();
  for (std::thread& t : workers) t.join();

  EXPECT_EQ(violations, 0);
  ASSERT_EQ(last_add.size(), static_cast<size_t>(kKeys));
  for (const auto& [key, added] : last_add) {
    EXPECT_GT(last_get[key], added) << key;
  }
  EXPECT_LE(gets.load(), int64_t{kProducers} * kAddsPerProducer);
}

TEST(WorkQueue, DelayedKeysBecomeReadyAtTheirTimeEarliestFirst) {
  FakeClock clock;
  WorkQueue queue(FakeClockOptions(clock));
  queue.AddAfter("a", milliseconds(30));
  queue.AddAfter("b", milliseconds(10));
  queue.AddAfter("c", milliseconds(20));
  EXPECT_EQ(queue.Depth(), 0u);
  clock.Advance(milliseconds(9));
  EXPECT_EQ(queue.Depth(), 0u);
  clock.Advance(milliseconds(1));
  EXPECT_EQ(queue.Depth(), 1u);
  clock.Advance(milliseconds(20));
  EXPECT_EQ(queue.Depth(), 3u);
  EXPECT_EQ(queue.Get(), "b");
  EXPECT_EQ(queue.Get(), "c");
  EXPECT_EQ(queue.Get(), "a");
}

TEST(WorkQueue, AddAfterKeepsTheEarlierTime) {
  FakeClock clock;
  WorkQueue queue(FakeClockOptions(clock));
  queue.AddAfter("late-then-early", milliseconds(100));
  queue.AddAfter("late-then-early", milliseconds(10));
  queue.AddAfter("early-then-late", milliseconds(10));
  queue.AddAfter("early-then-late", milliseconds(100));
  clock.Advance(milliseconds(10));
  EXPECT_EQ(queue.Depth(), 2u);
  const std::set<std::string> got = {queue.Get().value_or(""), queue.Get().value_or("")};
  EXPECT_EQ(got, (std::set<std::string>{"late-then-early", "early-then-late"}));
  queue.Done("late-then-early");
  queue.Done("early-then-late");
  clock.Advance(milliseconds(100));
  EXPECT_EQ(queue.Depth(), 0u);  // one delayed entry per key: nothing left at 100 ms
}

TEST(WorkQueue, AddAfterWithoutDelayAddsAtOnceAndADueKeyAlreadyQueuedIsNotDoubled) {
  FakeClock clock;
  WorkQueue queue(FakeClockOptions(clock));
  queue.AddAfter("now", milliseconds(0));
  queue.AddAfter("past", milliseconds(-5));
  EXPECT_EQ(queue.Depth(), 2u);
  queue.AddAfter("now", milliseconds(5));
  clock.Advance(milliseconds(5));
  EXPECT_EQ(queue.Depth(), 2u);
  EXPECT_EQ(queue.Get(), "now");
  EXPECT_EQ(queue.Get(), "past");
  EXPECT_EQ(queue.Depth(), 0u);
}

// AddRateLimited's delay for `key`, found by moving the fake clock 1 ms at a time; the key is
// then taken and Done.
int64_t RateLimitedDelayMs(WorkQueue& queue, FakeClock& clock, const std::string& key) {
  queue.AddRateLimited(key);
  int64_t waited = 0;
  while (queue.Depth() == 0 && waited < 1000000) {
    clock.Advance(milliseconds(1));
    ++waited;
  }
  EXPECT_EQ(queue.Get(), key);
  queue.Done(key);
  return waited;
}

TEST(WorkQueue, RateLimitedDelaysDoublePerFailureUpToTheCapAndForgetResetsThem) {
  FakeClock clock;
  WorkQueue queue(FakeClockOptions(clock, milliseconds(5), milliseconds(40)));
  EXPECT_EQ(queue.NumRequeues("a"), 0);
  EXPECT_EQ(RateLimitedDelayMs(queue, clock, "a"), 5);
  EXPECT_EQ(RateLimitedDelayMs(queue, clock, "a"), 10);
  EXPECT_EQ(RateLimitedDelayMs(queue, clock, "a"), 20);
  EXPECT_EQ(RateLimitedDelayMs(queue, clock, "a"), 40);
  EXPECT_EQ(RateLimitedDelayMs(queue, clock, "a"), 40);
  EXPECT_EQ(queue.NumRequeues("a"), 5);
  EXPECT_EQ(RateLimitedDelayMs(queue, clock, "b"), 5);  // failures are counted per key
  queue.Forget("a");
  EXPECT_EQ(queue.NumRequeues("a"), 0);
  EXPECT_EQ(queue.NumRequeues("b"), 1);
  EXPECT_EQ(RateLimitedDelayMs(queue, clock, "a"), 5);
}

TEST(WorkQueue, ManyFailuresStayAtTheCap) {
  FakeClock clock;
  WorkQueue queue(FakeClockOptions(clock, milliseconds(1), milliseconds(1000)));
  for (int i = 0; i < 100; ++i) {
    queue.AddRateLimited("a");
    clock.Advance(milliseconds(1000));
    ASSERT_EQ(queue.Get(), "a");
    queue.Done("a");
  }
  EXPECT_EQ(queue.NumRequeues("a"), 100);
  EXPECT_EQ(RateLimitedDelayMs(queue, clock, "a"), 1000);
}

TEST(WorkQueue, ShutDownWakesEveryBlockedGet) {
  WorkQueue queue;
  std::vector<std::optional<std::string>> results(3, std::string("unset"));
  std::vector<std::thread> getters;
  for (int i = 0; i < 3; ++i) {
    getters.emplace_back([&queue, &results, i] { results[i] = queue.Get(); });
  }
  queue.ShutDown();
  for (std::thread& t : getters) t.join();
  for (const auto& result : results) EXPECT_EQ(result, std::nullopt);
  EXPECT_TRUE(queue.ShuttingDown());
}

TEST(WorkQueue, ShutDownDrainsReadyKeysDropsDelayedOnesAndIgnoresNewAdds) {
  FakeClock clock;
  WorkQueue queue(FakeClockOptions(clock));
  queue.Add("a");
  queue.Add("b");
  queue.AddAfter("delayed", milliseconds(10));
  ASSERT_EQ(queue.Get(), "a");
  queue.Add("a");  // re-added while processing: still handed out after Done
  queue.ShutDown();
  queue.Add("c");
  queue.AddAfter("d", milliseconds(1));
  queue.AddRateLimited("e");
  clock.Advance(milliseconds(10));
  EXPECT_EQ(queue.Get(), "b");
  queue.Done("a");
  EXPECT_EQ(queue.Get(), "a");
  EXPECT_EQ(queue.Get(), std::nullopt);
  EXPECT_EQ(queue.Get(), std::nullopt);
}

TEST(WorkQueue, BlockedGetReturnsADelayedKeyWhenItIsDue) {
  WorkQueue queue;  // real clock
  std::optional<std::string> got;
  std::thread getter([&] { got = queue.Get(); });
  queue.AddAfter("a", milliseconds(2));
  getter.join();
  EXPECT_EQ(got, "a");
}

TEST(WorkQueue, KeysDueTogetherReachEveryBlockedGet) {
  WorkQueue queue;  // real clock
  std::mutex mu;
  std::set<std::string> got;  // guarded by mu
  std::vector<std::thread> getters;
  for (int i = 0; i < 2; ++i) {
    getters.emplace_back([&] {
      std::optional<std::string> key = queue.Get();
      std::lock_guard<std::mutex> lock(mu);
      got.insert(key.value_or("nullopt"));
    });
  }
  queue.AddAfter("a", milliseconds(3));
  queue.AddAfter("b", milliseconds(3));
  for (std::thread& t : getters) t.join();
  EXPECT_EQ(got, (std::set<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace psflow::controller
