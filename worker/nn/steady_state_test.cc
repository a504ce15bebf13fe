// "No allocation in the steady-state step": after a warm-up step, computing gradients (and
// clipping them) performs no heap allocation, for every seed model. Counted by replacing the
// global operator new in this test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "worker/background_exchange.h"
#include "worker/models/model_zoo.h"
#include "worker/nn/clip.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/towers.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace psflow::nn {
namespace {

// Allocations during `steps` training steps after one warm-up step.
int64_t AllocationsPerSteadyStep(const ModelSpec& spec, int64_t batch, int vocab, int steps) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(spec, *backend, batch);
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->params().Initialize(3);
  const int64_t labels = (*model)->labels_per_example();
  const GradientCheckInput in = RandomInput(spec, batch, labels, 9, vocab);
  const Batch b{in.inputs.data(), in.labels.data(), batch};
  EXPECT_TRUE((*model)->ComputeGradients(b, 1.0f).ok());
  const int64_t before = g_allocations.load();
  for (int s = 0; s < steps; ++s) EXPECT_TRUE((*model)->ComputeGradients(b, 1.0f).ok());
  EXPECT_TRUE((*model)->Evaluate(b).ok());
  return g_allocations.load() - before;
}

TEST(SteadyState, MnistMlpStepAllocatesNothing) {
  EXPECT_EQ(AllocationsPerSteadyStep(models::MnistMlp(), 16, 0, 3), 0);
}

TEST(SteadyState, MnistCnnStepAllocatesNothing) {
  EXPECT_EQ(AllocationsPerSteadyStep(models::MnistCnn(), 2, 0, 2), 0);
}

TEST(SteadyState, Cifar10CnnStepAllocatesNothing) {
  EXPECT_EQ(AllocationsPerSteadyStep(models::Cifar10Cnn(), 2, 0, 2), 0);
}

TEST(SteadyState, PtbLstmWithDropoutStepAllocatesNothing) {
  models::PtbConfig c = models::PtbConfigByName("test").value();
  c.num_layers = 2;
  c.hidden_size = 8;
  c.keep_prob = 0.5f;
  c.vocab_size = 50;
  EXPECT_EQ(AllocationsPerSteadyStep(models::PtbLstm(c, 5), 4, 50, 3), 0);
}

// The background exchange hands gradients over and takes parameters back without allocating.
class NullSync final : public ParameterSync {
 public:
  absl::Status Prepare(const ParameterSet&, bool) override { return absl::OkStatus(); }
  absl::StatusOr<SyncResult> Pull(ParameterSet&) override { return SyncResult{}; }
  absl::StatusOr<SyncResult> Push(ParameterSet&, int64_t) override { return SyncResult{}; }
  absl::Status SetLearningRate(float) override { return absl::OkStatus(); }
  absl::Status Leave() override { return absl::OkStatus(); }
};

TEST(SteadyState, BackgroundExchangeAllocatesNothing) {
  ParameterSet p;
  p.Declare("w", {100, 10}, Initializer::Zeros());
  const auto e = p.Declare("emb", {50, 4}, Initializer::Zeros());
  p.MarkSparse(e);
  p.Finalize();
  p.SetTouchedRows(e, {1, 2, 3, 7});
  NullSync sync;
  BackgroundExchange exchange(sync, p);
  exchange.Start(p, 8);
  ASSERT_TRUE(exchange.Finish(p).ok());
  const int64_t before = g_allocations.load();
  for (int s = 0; s < 5; ++s) {
    exchange.Start(p, 8);
    ASSERT_TRUE(exchange.Finish(p).ok());
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
}

// Towers: the hand-off to the tower threads, the slices and the average allocate nothing.
TEST(SteadyState, LstmTowersStepAllocatesNothing) {
  models::PtbConfig c = models::PtbConfigByName("test").value();
  c.num_layers = 2;
  c.hidden_size = 8;
  c.keep_prob = 0.5f;
  c.vocab_size = 50;
  const ModelSpec spec = models::PtbLstm(c, 5);
  auto b0 = MakeCpuBackend(1), b1 = MakeCpuBackend(1);
  auto towers = Towers::Create(spec, {b0.get(), b1.get()}, 4);
  ASSERT_TRUE(towers.ok()) << towers.status();
  (*towers)->params().Initialize(3);
  (*towers)->UploadParameters();
  const GradientCheckInput in = RandomInput(spec, 4, (*towers)->labels_per_example(), 9, 50);
  const Batch b{in.inputs.data(), in.labels.data(), 4};
  ASSERT_TRUE((*towers)->ComputeGradients(b, 1.0f).ok());
  const int64_t before = g_allocations.load();
  for (int s = 0; s < 3; ++s) {
    (*towers)->UploadParameters();
    ASSERT_TRUE((*towers)->ComputeGradients(b, 1.0f).ok());
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
}

}  // namespace
}  // namespace psflow::nn
