#include "ps/versioned_values.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <span>
#include <thread>
#include <vector>

namespace psflow {
namespace {

// 10 elements in blocks of 4: [0, 4) [4, 8) [8, 10).
constexpr int64_t kElements = 10;
constexpr int64_t kBlock = 4;

std::vector<float> ReadAll(const VersionedValues& v) {
  std::vector<float> out(static_cast<size_t>(v.size()));
  v.Read(0, out);
  return out;
}

std::vector<float> Iota(int64_t n, float first) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// The pins' values, back to back.
struct Pinned {
  std::vector<VersionedValues::Pin> pins;
  std::vector<float> Values() const {
    std::vector<float> out;
    for (const auto& p : pins) out.insert(out.end(), p.values.begin(), p.values.end());
    return out;
  }
  void Unpin() {
    for (const auto& p : pins) VersionedValues::Unpin(p.handle);
    pins.clear();
  }
};

Pinned PinAll(const VersionedValues& v, int64_t offset, int64_t count) {
  Pinned p;
  v.PinRuns(offset, count, [&](const VersionedValues::Pin& pin) { p.pins.push_back(pin); });
  return p;
}

void AddOne(VersionedValues& v, int64_t offset, int64_t count) {
  v.Update(offset, count, [](std::span<float> run, int64_t) {
    for (float& x : run) x += 1;
  });
}

TEST(VersionedValuesTest, StartsZeroedAndWritesLandAcrossBlocks) {
  VersionedValues v(kElements, kBlock);
  EXPECT_EQ(ReadAll(v), std::vector<float>(kElements, 0.0f));
  v.Write(3, std::vector<float>{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(ReadAll(v), (std::vector<float>{0, 0, 0, 1, 2, 3, 4, 5, 6, 0}));
  std::vector<float> part(3);
  v.Read(7, part);
  EXPECT_EQ(part, (std::vector<float>{5, 6, 0}));
}

TEST(VersionedValuesTest, RunsAndPinsEndAtBlockEnds) {
  VersionedValues v(kElements, kBlock);
  v.Write(0, Iota(kElements, 0));
  std::vector<size_t> runs;
  v.ForEachRun(2, 7, [&](std::span<const float> run) { runs.push_back(run.size()); });
  EXPECT_EQ(runs, (std::vector<size_t>{2, 4, 1}));
  Pinned p = PinAll(v, 2, 7);
  ASSERT_EQ(p.pins.size(), 3u);
  EXPECT_EQ(p.Values(), Iota(7, 2));
  p.Unpin();
  // Nothing to pin, nothing pinned.
  EXPECT_TRUE(PinAll(v, 5, 0).pins.empty());
}

TEST(VersionedValuesTest, UpdateVisitsEveryElementOnceInOrderInRunsOfAtMostKRunElements) {
  const int64_t n = 3 * VersionedValues::kRunElements + 5;
  VersionedValues v(n, 2 * VersionedValues::kRunElements + 1);
  int64_t next = 7;
  v.Update(7, n - 9, [&](std::span<float> run, int64_t at) {
    EXPECT_EQ(at, next);
    EXPECT_LE(static_cast<int64_t>(run.size()), VersionedValues::kRunElements);
    for (size_t i = 0; i < run.size(); ++i) run[i] = static_cast<float>(at + i);
    next = at + static_cast<int64_t>(run.size());
  });
  EXPECT_EQ(next, n - 2);
  const std::vector<float> all = ReadAll(v);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(all[i], i >= 7 && i < n - 2 ? static_cast<float>(i) : 0.0f) << i;
  }
}

// The copy-on-write contract: a pin keeps the version it saw, the current values move on, and
// the elements of a pinned block outside an update's range carry over to the new version.
TEST(VersionedValuesTest, PinKeepsItsVersionWhileUpdatesMoveOn) {
  VersionedValues v(kElements, kBlock);
  v.Write(0, Iota(kElements, 0));
  Pinned before = PinAll(v, 0, kElements);
  AddOne(v, 2, 5);  // the ends of blocks 0 and 1 only
  Pinned middle = PinAll(v, 1, 8);
  AddOne(v, 0, kElements);
  v.Write(9, std::vector<float>{100});

  EXPECT_EQ(before.Values(), Iota(kElements, 0));
  EXPECT_EQ(middle.Values(), (std::vector<float>{1, 3, 4, 5, 6, 7, 7, 8}));
  EXPECT_EQ(ReadAll(v), (std::vector<float>{1, 2, 4, 5, 6, 7, 8, 8, 9, 100}));
  before.Unpin();
  middle.Unpin();
  AddOne(v, 0, kElements);
  EXPECT_EQ(ReadAll(v), (std::vector<float>{2, 3, 5, 6, 7, 8, 9, 9, 10, 101}));
}

TEST(VersionedValuesTest, UnpinnedBlocksAreUpdatedInPlace) {
  VersionedValues v(kElements, kBlock);
  Pinned p = PinAll(v, 0, kBlock);
  const float* pinned = p.pins[0].values.data();
  p.Unpin();
  AddOne(v, 0, kElements);
  p = PinAll(v, 0, kBlock);
  EXPECT_EQ(p.pins[0].values.data(), pinned);
  p.Unpin();
}

// Steady state: a block pinned and updated every round alternates between two buffers (the
// released version goes back to the pool and is the next copy-on-write's target).
TEST(VersionedValuesTest, ReleasedVersionsAreReused) {
  VersionedValues v(kElements, kBlock);
  std::vector<const float*> seen;
  for (int round = 0; round < 6; ++round) {
    Pinned p = PinAll(v, 8, 2);
    seen.push_back(p.pins[0].values.data());
    AddOne(v, 8, 2);
    p.Unpin();
  }
  EXPECT_NE(seen[0], seen[1]);
  for (size_t i = 2; i < seen.size(); ++i) EXPECT_EQ(seen[i], seen[i % 2]) << i;
  EXPECT_EQ(ReadAll(v)[9], 6.0f);
}

TEST(VersionedValuesTest, PinsOutliveTheValues) {
  auto v = std::make_unique<VersionedValues>(kElements, kBlock);
  v->Write(0, Iota(kElements, 1));
  Pinned p = PinAll(*v, 0, kElements);
  AddOne(*v, 0, 1);  // one old version, held by the pin only
  v.reset();
  EXPECT_EQ(p.Values(), Iota(kElements, 1));
  p.Unpin();
}

// What a pull reply sees: pinned under the lock while another thread updates everything, each
// pin shows one update's values (every element equal), unchanged until it is released.
TEST(VersionedValuesTest, ConcurrentPinsSeeOneUpdateEach) {
  constexpr int64_t kN = 5000;
  constexpr int kUpdates = 2000;
  VersionedValues v(kN, 256);
  std::mutex mu;  // the partition's lock
  std::atomic<bool> done{false};
  std::thread updater([&] {
    for (int i = 0; i < kUpdates; ++i) {
      std::lock_guard lock(mu);
      AddOne(v, 0, kN);
    }
    done.store(true);
  });
  int failures = 0;
  float last = 0;
  while (!done.load()) {
    Pinned p;
    {
      std::lock_guard lock(mu);
      p = PinAll(v, 0, kN);
    }
    const std::vector<float> first = p.Values();
    std::this_thread::yield();
    const std::vector<float> again = p.Values();
    p.Unpin();
    for (float x : first) failures += x != first[0];
    failures += again != first;
    failures += first[0] < last;
    last = first[0];
  }
  updater.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(ReadAll(v), std::vector<float>(kN, kUpdates));
}

}  // namespace
}  // namespace psflow
