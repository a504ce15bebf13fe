#include "worker/data/dataset.h"

#include <gtest/gtest.h>

#include <set>

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
  for (auto* epoch : {&epoch1, &epoch2}) {
    for (int b = 0; b < 2; ++b) {
      const nn::Batch batch = sampler.Next();
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

TEST(BatchSampler, SameSeedSameOrder) {
  const Dataset d = Numbered(50);
  BatchSampler a(d, Range{0, 50}, 10, 42), b(d, Range{0, 50}, 10, 42);
  for (int i = 0; i < 7; ++i) {
    const auto x = a.Next();
    const auto y = b.Next();
    EXPECT_TRUE(std::equal(x.labels, x.labels + 10, y.labels));
  }
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
