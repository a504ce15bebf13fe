#include "worker/nn/parameter_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "worker/nn/counting_host_memory.h"

namespace psflow::nn {
namespace {

TEST(ParameterSet, OneAlignedBufferWithStableViews) {
  ParameterSet p;
  const auto w = p.Declare("w", {784, 100}, Initializer::GlorotUniform());
  const auto b = p.Declare("b", {3}, Initializer::Zeros());
  const auto c = p.Declare("c", {5}, Initializer::Uniform(0.5f));
  p.Finalize();
  EXPECT_EQ(p.value(w).size(), 78400u);
  EXPECT_EQ(p.value(b).size(), 3u);
  // Each parameter starts on a 64-byte boundary of the same buffer.
  for (auto h : {w, b, c}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.value(h).data()) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.grad(h).data()) % 64, 0u);
    EXPECT_GE(p.value(h).data(), p.values().data());
    EXPECT_LE(p.value(h).data() + p.value(h).size(), p.values().data() + p.values().size());
  }
  EXPECT_EQ(p.descs()[1].offset, 78400);
  EXPECT_EQ(p.descs()[2].offset, 78400 + 16);
}

TEST(ParameterSet, InitializersAreSeededAndBounded) {
  auto make = [](uint64_t seed) {
    auto p = std::make_unique<ParameterSet>();
    p->Declare("w", {784, 100}, Initializer::GlorotUniform());
    p->Declare("b", {100}, Initializer::Zeros());
    p->Declare("u", {1000}, Initializer::Uniform(0.1f));
    p->Finalize();
    p->Initialize(seed);
    return p;
  };
  auto p1 = make(1), p2 = make(1), p3 = make(2);
  EXPECT_TRUE(std::equal(p1->values().begin(), p1->values().end(), p2->values().begin()));
  EXPECT_FALSE(std::equal(p1->values().begin(), p1->values().end(), p3->values().begin()));
  const float limit = std::sqrt(6.0f / (784 + 100));
  float max_abs = 0;
  double sum = 0;
  for (float x : p1->value(0)) {
    max_abs = std::max(max_abs, std::fabs(x));
    sum += x;
  }
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.95f * limit);            // the range is used
  EXPECT_NEAR(sum / 78400, 0.0, 0.01 * limit);  // centred
  for (float x : p1->value(1)) EXPECT_EQ(x, 0.0f);
  for (float x : p1->value(2)) EXPECT_LE(std::fabs(x), 0.1f);
}

TEST(ParameterSet, SameLayoutKeepsOffsetsAndSparsenessAndCopiesValues) {
  ParameterSet p;
  p.Declare("w", {3, 5}, Initializer::Uniform(1.0f));
  const auto e = p.Declare("emb", {10, 4}, Initializer::Uniform(1.0f));
  p.MarkSparse(e);
  p.Finalize();
  p.Initialize(4);
  const std::unique_ptr<ParameterSet> q = ParameterSet::SameLayoutAs(p);
  ASSERT_TRUE(q->finalized());
  ASSERT_EQ(q->descs().size(), 2u);
  EXPECT_EQ(q->total_size(), p.total_size());
  EXPECT_EQ(q->descs()[1].offset, p.descs()[1].offset);
  EXPECT_EQ(q->descs()[1].name, "emb");
  EXPECT_TRUE(q->sparse(e));
  EXPECT_FALSE(q->on_device());
  for (float v : q->values()) EXPECT_EQ(v, 0.0f);
  q->CopyValuesFrom(p);
  EXPECT_TRUE(std::equal(p.values().begin(), p.values().end(), q->values().begin()));
}

TEST(ParameterSet, RowsToPullAreOffUntilSetAndCopyWithTheFlag) {
  ParameterSet p;
  const auto w = p.Declare("w", {3, 5}, Initializer::Zeros());
  const auto e = p.Declare("emb", {10, 4}, Initializer::Zeros());
  p.MarkSparse(e);
  p.Finalize();
  EXPECT_FALSE(p.pulls_rows());
  EXPECT_TRUE(p.rows_to_pull(e).empty());
  p.mutable_rows_to_pull(e) = {1, 4, 9};
  p.set_pulls_rows(true);

  const std::unique_ptr<ParameterSet> q = ParameterSet::SameLayoutAs(p);
  EXPECT_FALSE(q->pulls_rows());
  q->CopyRowsToPullFrom(p);
  EXPECT_TRUE(q->pulls_rows());
  EXPECT_EQ(std::vector<int64_t>(q->rows_to_pull(e).begin(), q->rows_to_pull(e).end()),
            (std::vector<int64_t>{1, 4, 9}));
  EXPECT_TRUE(q->rows_to_pull(w).empty());
  p.set_pulls_rows(false);
  q->CopyRowsToPullFrom(p);
  EXPECT_FALSE(q->pulls_rows());
}

std::unique_ptr<ParameterSet> Finalized() {
  auto p = std::make_unique<ParameterSet>();
  p->Declare("w", {3, 5}, Initializer::Uniform(1.0f));
  const auto e = p->Declare("emb", {10, 4}, Initializer::Uniform(1.0f));
  p->MarkSparse(e);
  p->Finalize();
  p->Initialize(4);
  return p;
}

TEST(ParameterSet, HostBuffersMoveWithWhatTheyHold) {
  CountingHostMemory memory(2);
  auto p = Finalized();
  p->grads()[3] = 7;
  const std::vector<float> values(p->values().begin(), p->values().end());
  EXPECT_EQ(p->host_memory(), nullptr);
  ASSERT_TRUE(p->MoveHostBuffersTo(memory));
  EXPECT_EQ(p->host_memory(), &memory);
  EXPECT_EQ(memory.given, (std::set<void*>{p->values().data(), p->grads().data()}));
  EXPECT_TRUE(std::equal(values.begin(), values.end(), p->values().begin()));
  EXPECT_EQ(p->grads()[3], 7);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p->value(1).data()) % 64, 0u);
}

TEST(ParameterSet, AMemoryWithoutRoomChangesNothing) {
  CountingHostMemory memory(1);  // one buffer of the two
  auto p = Finalized();
  const float* values = p->values().data();
  EXPECT_FALSE(p->MoveHostBuffersTo(memory));
  EXPECT_EQ(p->host_memory(), nullptr);
  EXPECT_EQ(p->values().data(), values);
  EXPECT_TRUE(memory.given.empty());  // the one it gave went back
}

// The second buffer pair of an overlapped exchange is pinned as the first is; where the memory
// has no room, it is made on the heap (one WARNING) and works all the same.
TEST(ParameterSet, SameLayoutAllocatesInTheSameMemory) {
  CountingHostMemory memory(3);
  auto p = Finalized();
  ASSERT_TRUE(p->MoveHostBuffersTo(memory));
  const std::unique_ptr<ParameterSet> q = ParameterSet::SameLayoutAs(*p);
  EXPECT_EQ(q->host_memory(), nullptr);  // room for one more buffer only: the heap
  EXPECT_EQ(memory.given.size(), 2u);
  CountingHostMemory roomy(4);
  auto r = Finalized();
  ASSERT_TRUE(r->MoveHostBuffersTo(roomy));
  const std::unique_ptr<ParameterSet> s = ParameterSet::SameLayoutAs(*r);
  EXPECT_EQ(s->host_memory(), &roomy);
  EXPECT_EQ(roomy.given.size(), 4u);
  for (float v : s->values()) EXPECT_EQ(v, 0.0f);
  for (float v : s->grads()) EXPECT_EQ(v, 0.0f);
}

// A swap exchanges buffers with their memory: each goes back to the memory that gave it, from
// whichever set holds it then (CountingHostMemory's destructor checks that all came back, and Free
// that none came back to another), attached to a device or not.
TEST(ParameterSet, SwappedBuffersGoBackToTheirMemory) {
  CountingHostMemory memory(2);
  auto p = Finalized();
  ASSERT_TRUE(p->MoveHostBuffersTo(memory));
  float* const pinned_values = p->values().data();
  float* const pinned_grads = p->grads().data();
  std::vector<float> mirror(static_cast<size_t>(2 * p->total_size()));
  p->AttachDevice(mirror.data(), mirror.data() + p->total_size());
  auto heap = Finalized();
  heap->values()[0] = 42;
  p->SwapValues(*heap);
  p->SwapGradients(*heap);
  EXPECT_EQ(p->values()[0], 42);
  EXPECT_EQ(heap->values().data(), pinned_values);
  EXPECT_EQ(heap->grads().data(), pinned_grads);
  EXPECT_EQ(p->device_values(), mirror.data());  // the device mirror stays
  heap.reset();                                  // its buffers go back to `memory`
  EXPECT_TRUE(memory.given.empty());
}

}  // namespace
}  // namespace psflow::nn
