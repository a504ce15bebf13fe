#include "worker/data/dataset.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "worker/data/prefetcher.h"

namespace psflow::data {
namespace {

TEST(ShardRange, ContiguousDisjointAndCovering) {
  EXPECT_EQ(ShardRange(60000, 0, 2).begin, 0);
  EXPECT_EQ(ShardRange(60000, 0, 2).end, 30000);
  EXPECT_EQ(ShardRange(60000, 1, 2).begin, 30000);
  EXPECT_EQ(ShardRange(60000, 1, 2).end, 60000);
  // 10 over 3: sizes 4, 3, 3.
  int64_t next = 0;
  for (int i = 0; i < 3; ++i) {
    const Range r = ShardRange(10, i, 3);
    EXPECT_EQ(r.begin, next);
    EXPECT_EQ(r.size(), i == 0 ? 4 : 3);
    next = r.end;
  }
  EXPECT_EQ(next, 10);
}

Dataset Numbered(int n) {
  Dataset d;
  d.example_shape = {2};
  d.num_classes = n;
  for (int i = 0; i < n; ++i) {
    d.inputs.push_back(static_cast<float>(i));
    d.inputs.push_back(static_cast<float>(-i));
    d.labels.push_back(i);
  }
  return d;
}

TEST(BatchSampler, EachEpochVisitsTheShardOnceInFreshOrder) {
  const Dataset d = Numbered(20);
  BatchSampler sampler(d, Range{10, 20}, /*batch_size=*/5, /*seed=*/3);
  ASSERT_EQ(sampler.batches_per_epoch(), 2);
  std::vector<int> epoch1, epoch2;
  BatchBuffer buffer;
  for (auto* epoch : {&epoch1, &epoch2}) {
    for (int b = 0; b < 2; ++b) {
      sampler.Fill(buffer);
      const nn::Batch batch = buffer.view();
      ASSERT_EQ(batch.size, 5);
      for (int i = 0; i < 5; ++i) {
        // Inputs travel with their label.
        EXPECT_EQ(batch.inputs[2 * i], static_cast<float>(batch.labels[i]));
        EXPECT_EQ(batch.inputs[2 * i + 1], -static_cast<float>(batch.labels[i]));
        epoch->push_back(batch.labels[i]);
      }
    }
  }
  for (const auto& epoch : {epoch1, epoch2}) {
    EXPECT_EQ(std::set<int>(epoch.begin(), epoch.end()),
              (std::set<int>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  }
  EXPECT_NE(epoch1, epoch2);
}

TEST(BatchSampler, SameSeedSameOrderAlsoThroughThePrefetcher) {
  const Dataset d = Numbered(50);
  BatchSampler a(d, Range{0, 50}, 10, 42);
  Prefetcher b(std::make_unique<BatchSampler>(d, Range{0, 50}, 10, 42), /*depth=*/3);
  EXPECT_EQ(b.batches_per_epoch(), 5);
  BatchBuffer buffer;
  for (int i = 0; i < 23; ++i) {
    a.Fill(buffer);
    const nn::Batch y = b.Next();
    ASSERT_EQ(y.size, 10);
    EXPECT_TRUE(std::equal(buffer.labels.begin(), buffer.labels.end(), y.labels)) << i;
    EXPECT_TRUE(std::equal(buffer.inputs.begin(), buffer.inputs.end(), y.inputs)) << i;
  }
}

// Counts its fills; each batch holds its own sequence number.
class CountingSource final : public BatchSource {
 public:
  explicit CountingSource(std::atomic<int>* fills) : fills_(fills) {}
  int64_t batches_per_epoch() const override { return 4; }
  void Fill(BatchBuffer& out) override {
    out.inputs.assign(1, static_cast<float>(fills_->fetch_add(1)));
    out.labels.assign(1, 0);
    out.size = 1;
  }

 private:
  std::atomic<int>* fills_;
};

TEST(Prefetcher, FillsAtMostDepthAheadAndNeverOverwritesTheHeldBatch) {
  std::atomic<int> fills{0};
  Prefetcher p(std::make_unique<CountingSource>(&fills), /*depth=*/2);
  for (int i = 0; i < 50; ++i) {
    const nn::Batch b = p.Next();
    // The batch stays intact while the thread runs ahead.
    std::this_thread::sleep_for(std::chrono::microseconds(i % 5 == 0 ? 2000 : 0));
    EXPECT_EQ(b.inputs[0], static_cast<float>(i));
    EXPECT_LE(fills.load(), i + 1 + 2);
  }
}

// Peek(k) shows the batch the (k+1)-th next Next() returns; it stays intact while the thread
// runs ahead, until it has been taken and released.
TEST(Prefetcher, PeekShowsTheBatchesAheadWithoutTakingThem) {
  std::atomic<int> fills{0};
  Prefetcher p(std::make_unique<CountingSource>(&fills), /*depth=*/3);
  EXPECT_EQ(p.depth(), 3);
  EXPECT_EQ(p.Peek(2).inputs[0], 2.0f);
  for (int i = 0; i < 40; ++i) {
    const nn::Batch ahead = p.Peek(i % 3);
    const nn::Batch b = p.Next();
    EXPECT_EQ(b.inputs[0], static_cast<float>(i));
    std::this_thread::sleep_for(std::chrono::microseconds(i % 5 == 0 ? 2000 : 0));
    EXPECT_EQ(ahead.inputs[0], static_cast<float>(i + i % 3)) << i;
    EXPECT_EQ(p.Peek(1).inputs[0], static_cast<float>(i + 2));
  }
}

TEST(Prefetcher, StopsWhileItsThreadWaitsForRoom) {
  std::atomic<int> fills{0};
  {
    Prefetcher p(std::make_unique<CountingSource>(&fills), /*depth=*/1);
    EXPECT_EQ(p.Next().inputs[0], 0.0f);
  }  // joins without hanging
  EXPECT_LE(fills.load(), 2);
}

TEST(ForEachBatch, CoversEveryRowWithASmallerLastBatch) {
  const Dataset d = Numbered(23);
  std::vector<int64_t> sizes;
  int64_t sum = 0;
  ForEachBatch(d, 10, [&](const nn::Batch& b) {
    sizes.push_back(b.size);
    for (int64_t i = 0; i < b.size; ++i) sum += b.labels[i];
  });
  EXPECT_EQ(sizes, (std::vector<int64_t>{10, 10, 3}));
  EXPECT_EQ(sum, 22 * 23 / 2);
}

}  // namespace
}  // namespace psflow::data
