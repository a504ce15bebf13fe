// "No allocation in the steady-state step": after a warm-up step, computing gradients (and
// clipping them) performs no heap allocation, for every seed model. Counted by replacing the
// global operator new in this test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "worker/background_exchange.h"
#include "worker/data/prefetcher.h"
#include "worker/data/synthetic.h"
#include "worker/models/model_zoo.h"
#include "worker/models/reference_models.h"
#include "worker/nn/clip.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/towers.h"
#include "worker/overlapped_sync.h"
#include "worker/trainer.h"

namespace {
std::atomic<int64_t> g_allocations{0};
thread_local int64_t t_allocations = 0;  // this thread's alone
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// The replaced operator new above allocates with malloc, so free is the matching release; GCC
// cannot see that once the trainer's code is inlined into this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

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
  p.mutable_rows_to_pull(e) = {0, 2, 9};
  p.set_pulls_rows(true);
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

// The trainer's whole loop — the rows to pull, pull, input, compute, push, the step's
// accounting — allocates nothing per step on its thread (a model with an embedding: sparse pulls),
// serial (LocalUpdate) and overlapped (OverlappedSync; its background thread is
// BackgroundExchangeAllocatesNothing's). Counted between the 4th and the 12th step's compute by a
// Trainable that notes this thread's count as each step computes (its steps stream their layers to
// the sync: Trainer's GradientForwarder).
class CountingTrainable final : public Trainable {
 public:
  explicit CountingTrainable(Model& model) : model_(model) { marks.reserve(64); }
  ParameterSet& params() override { return model_.params(); }
  int64_t labels_per_example() const override { return model_.labels_per_example(); }
  absl::StatusOr<double> ComputeGradients(const Batch& batch, float clip_norm) override {
    marks.push_back(t_allocations);
    return model_.ComputeGradients(batch, clip_norm);
  }
  void SetLossScale(float scale) override { model_.SetLossScale(scale); }
  bool last_step_finite() const override { return model_.last_step_finite(); }
  void ResetState() override { model_.ResetState(); }
  absl::Status ListRowsRead(const Batch& batch, ParameterSet& into) override {
    return model_.ListRowsRead(batch, into);
  }
  // The trainer's gradient listener reaches the model: streaming is part of what is counted.
  void SetGradientListener(GradientListener* listener) override {
    model_.SetGradientListener(listener);
  }
  std::vector<int64_t> marks;

 private:
  Model& model_;
};

TEST(SteadyState, TrainerStepsAllocateNothing) {
  for (int mode = 0; mode < 3; ++mode) {
    const bool overlapped = mode > 0;
    const HandOver hand_over = mode == 2 ? HandOver::kSwap : HandOver::kCopy;
    SCOPED_TRACE(!overlapped ? "serial" : mode == 1 ? "overlapped, copied" : "overlapped, swapped");
    auto backend = MakeCpuBackend(1);
    // 4 token ids per example, 32 per batch, of 4 words: every batch reads every row.
    ModelSpec spec{.name = "tiny", .input_shape = {4}, .num_classes = 4, .layers = {}};
    spec.layers.push_back(EmbeddingSpec{.vocab_size = 4, .dim = 3});
    spec.layers.push_back(FlattenSpec{});
    spec.layers.push_back(DenseSpec{.units = 4});
    auto model = Model::Create(spec, *backend, 8);
    ASSERT_TRUE(model.ok()) << model.status();
    CountingTrainable counting(**model);
    data::SyntheticShape shape{
        .example_elements = 4, .num_classes = 4, .vocab_size = 4, .batches_per_epoch = 100};
    data::Prefetcher input(std::make_unique<data::SyntheticSource>(shape, 8, 1));
    TrainingConfig config;
    config.optimizer.set_name("momentum");
    config.optimizer.set_learning_rate(0.1f);
    auto local = LocalUpdate::Create(config);
    ASSERT_TRUE(local.ok()) << local.status();
    NullSync null_sync;
    OverlappedSync overlap(null_sync, counting.params(), hand_over);
    TrainerOptions options;
    options.train_steps = 12;
    options.log_every_steps = 0;
    options.learning_rate = 0.1f;
    Trainer trainer(counting, overlapped ? static_cast<ParameterSync&>(overlap) : **local, input,
                    options, nullptr);
    ASSERT_TRUE(trainer.Run().ok());
    ASSERT_EQ(counting.marks.size(), 12u);
    EXPECT_EQ(counting.marks[11] - counting.marks[3], 0);
  }
}

// Towers: the hand-off to the tower threads, the slices and the average allocate nothing; nor
// does a streaming step (a listener, no clip): the marks, the layer sums and the relay to the
// caller's thread.
class CountingListener final : public GradientListener {
 public:
  void GradientsReady(ParameterSet::Handle, ParameterSet::Handle) override { ++told; }
  int told = 0;
};

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
  const GradientCheckInput in = RandomInput(spec, 4, (*towers)->labels_per_example(), 9, 50);
  const Batch b{in.inputs.data(), in.labels.data(), 4};
  ASSERT_TRUE((*towers)->ComputeGradients(b, 1.0f).ok());
  const int64_t before = g_allocations.load();
  for (int s = 0; s < 3; ++s) {
    (*towers)->params().ValuesChanged();  // as a pull does: every tower copies and uploads
    ASSERT_TRUE((*towers)->ComputeGradients(b, 1.0f).ok());
  }
  EXPECT_EQ(g_allocations.load() - before, 0);

  CountingListener listener;
  (*towers)->SetGradientListener(&listener);
  ASSERT_TRUE((*towers)->ComputeGradients(b, 0).ok());
  const int per_step = listener.told;
  ASSERT_GT(per_step, 1);
  const int64_t streaming = g_allocations.load();
  for (int s = 0; s < 3; ++s) {
    (*towers)->params().ValuesChanged();
    ASSERT_TRUE((*towers)->ComputeGradients(b, 0).ok());
  }
  EXPECT_EQ(g_allocations.load() - streaming, 0);
  EXPECT_EQ(listener.told, 4 * per_step);
  (*towers)->SetGradientListener(nullptr);
}

}  // namespace
}  // namespace psflow::nn
