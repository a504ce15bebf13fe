// ReplayTrainable (--compute=replay) and the per-layer profile it replays: the gradients are the
// real model's first step's, every layer is reported once per step in backward order, and a step
// takes at least its time (a lower bound: a correctness property, not a speed).
#include "worker/replay_trainable.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "worker/nn/backend.h"
#include "worker/nn/model.h"

namespace psflow {
namespace {

using nn::LayerTime;
using Clock = std::chrono::steady_clock;

constexpr int kVocab = 10;
constexpr int kClasses = 6;
constexpr int64_t kBatch = 2;

// Token ids [3] -> embedding (sparse gradient) -> dropout -> dense -> relu -> dense logits per
// time step. Parameter handles: embedding0 [0, 1), dense2 [1, 3), dense4 [3, 5).
nn::ModelSpec SmallModel() {
  return nn::ModelSpec{
      .name = "small",
      .input_shape = {3},
      .num_classes = kClasses,
      .layers = {nn::EmbeddingSpec{kVocab, 4}, nn::DropoutSpec{0.5f}, nn::DenseSpec{5},
                 nn::ActivationSpec{nn::ActivationKind::kRelu}, nn::DenseSpec{kClasses}}};
}

struct Fixture {
  std::unique_ptr<nn::Backend> backend = nn::MakeCpuBackend(1);
  std::unique_ptr<nn::Model> model;
  Fixture() {
    model = *nn::Model::Create(SmallModel(), *backend, kBatch, /*seed=*/3);
    model->params().Initialize(7);
  }
};

// Two batches with different tokens and labels.
struct Batches {
  std::vector<float> ids_a = {1, 2, 3, 4, 5, 6}, ids_b = {9, 8, 7, 0, 0, 1};
  std::vector<int32_t> labels_a = {0, 1, 2, 3, 4, 5}, labels_b = {5, 5, 0, 1, 1, 2};
  nn::Batch a() const { return {ids_a.data(), labels_a.data(), kBatch}; }
  nn::Batch b() const { return {ids_b.data(), labels_b.data(), kBatch}; }
};

std::vector<LayerTime> Times(double forward, double backward) {
  std::vector<LayerTime> t;
  for (const char* name : {"embedding0", "dropout1", "dense2", "activation3", "dense4"}) {
    t.push_back({name, forward, backward});
  }
  return t;
}

struct Report {
  nn::ParameterSet::Handle first, last;
  Clock::time_point at;
};

class RecordingListener final : public nn::GradientListener {
 public:
  void GradientsReady(nn::ParameterSet::Handle first, nn::ParameterSet::Handle last) override {
    reports.push_back({first, last, Clock::now()});
  }
  std::vector<Report> reports;
};

std::vector<std::pair<int, int>> Ranges(const std::vector<Report>& reports) {
  std::vector<std::pair<int, int>> r;
  for (const Report& x : reports) r.emplace_back(x.first, x.last);
  return r;
}

TEST(ModelLayers, EachLayerNamesItsParameterHandles) {
  Fixture f;
  ASSERT_EQ(f.model->num_layers(), 5);
  EXPECT_EQ(f.model->layer_name(0), "embedding0");
  EXPECT_EQ(f.model->layer_name(4), "dense4");
  EXPECT_EQ(f.model->layer_params(0), std::make_pair(0, 1));
  EXPECT_EQ(f.model->layer_params(1), std::make_pair(1, 1));  // dropout: none
  EXPECT_EQ(f.model->layer_params(2), std::make_pair(1, 3));
  EXPECT_EQ(f.model->layer_params(3), std::make_pair(3, 3));
  EXPECT_EQ(f.model->layer_params(4), std::make_pair(3, 5));
}

TEST(ModelLayers, ProfilingTimesEveryLayerAndLeavesTheNextStepAsItWouldHaveBeen) {
  Fixture profiled, plain;
  const Batches batches;
  const absl::StatusOr<std::vector<LayerTime>> times =
      profiled.model->ProfileLayers(batches.b(), 3);
  ASSERT_TRUE(times.ok()) << times.status();
  ASSERT_EQ(times->size(), 5u);
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ((*times)[static_cast<size_t>(l)].layer, profiled.model->layer_name(l));
    EXPECT_GE((*times)[static_cast<size_t>(l)].forward_seconds, 0);
    EXPECT_GE((*times)[static_cast<size_t>(l)].backward_seconds, 0);
  }
  // The same dropout masks and values: the same gradients, bit for bit.
  const absl::StatusOr<double> a = profiled.model->ComputeGradients(batches.a());
  const absl::StatusOr<double> b = plain.model->ComputeGradients(batches.a());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  const auto ga = profiled.model->params().grads(), gb = plain.model->params().grads();
  EXPECT_EQ(std::vector<float>(ga.begin(), ga.end()), std::vector<float>(gb.begin(), gb.end()));
  EXPECT_EQ(profiled.model->ProfileLayers(batches.a(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReplayTrainable, GradientsAndLossAreTheRealModelsFirstStepsForGood) {
  Fixture real, replayed;
  const Batches batches;
  const absl::StatusOr<double> real_loss = real.model->ComputeGradients(batches.a());
  ASSERT_TRUE(real_loss.ok());
  ReplayTrainable replay(*replayed.model, Times(0, 0));
  for (const nn::Batch& batch : {batches.a(), batches.b(), batches.b()}) {
    const absl::StatusOr<double> loss = replay.ComputeGradients(batch, 0);
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_EQ(*loss, *real_loss);
    EXPECT_TRUE(replay.last_step_finite());
    const auto want = real.model->params().grads(), got = replay.params().grads();
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()),
              std::vector<float>(want.begin(), want.end()));
    const auto want_rows = real.model->params().touched_rows(0);
    const auto got_rows = replay.params().touched_rows(0);
    EXPECT_EQ(std::vector<int64_t>(got_rows.begin(), got_rows.end()),
              std::vector<int64_t>(want_rows.begin(), want_rows.end()));
  }
}

// An overlapped exchange that swaps buffers (HandOver::kSwap) gives the set another gradient
// buffer each step: every step still leaves the kept gradients and touched rows there.
TEST(ReplayTrainable, KeptGradientsSurviveSwappedGradientBuffers) {
  Fixture real, replayed;
  const Batches batches;
  ASSERT_TRUE(real.model->ComputeGradients(batches.a()).ok());
  ReplayTrainable replay(*replayed.model, Times(0, 0));
  ASSERT_TRUE(replay.ComputeGradients(batches.a(), 0).ok());
  auto other = nn::ParameterSet::SameLayoutAs(replay.params());
  for (int step = 0; step < 4; ++step) {
    // The exchange takes this step's buffer and gives back its own (zeroed at first; it only
    // reads the gradients it pushes).
    replay.params().SwapGradients(*other);
    ASSERT_TRUE(replay.ComputeGradients(batches.b(), 0).ok());
    const auto want = real.model->params().grads(), got = replay.params().grads();
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()),
              std::vector<float>(want.begin(), want.end()))
        << "step " << step;
    const auto want_rows = real.model->params().touched_rows(0);
    const auto got_rows = replay.params().touched_rows(0);
    EXPECT_EQ(std::vector<int64_t>(got_rows.begin(), got_rows.end()),
              std::vector<int64_t>(want_rows.begin(), want_rows.end()));
  }
}

TEST(ReplayTrainable, ReportsEveryLayerWithParametersOncePerStepLastFirst) {
  Fixture f;
  const Batches batches;
  ReplayTrainable replay(*f.model, Times(0, 0));
  RecordingListener listener;
  replay.SetGradientListener(&listener);
  const std::vector<std::pair<int, int>> step = {{3, 5}, {1, 3}, {0, 1}};
  ASSERT_TRUE(replay.ComputeGradients(batches.a(), 0).ok());  // the real step
  EXPECT_EQ(Ranges(listener.reports), step);
  listener.reports.clear();
  ASSERT_TRUE(replay.ComputeGradients(batches.b(), 0).ok());  // replayed
  EXPECT_EQ(Ranges(listener.reports), step);
}

TEST(ReplayTrainable, ClippedOrLossScaledStepsDoNotStream) {
  Fixture f;
  const Batches batches;
  ReplayTrainable replay(*f.model, Times(0, 0));
  RecordingListener listener;
  replay.SetGradientListener(&listener);
  ASSERT_TRUE(replay.ComputeGradients(batches.a(), 1.0f).ok());
  ASSERT_TRUE(replay.ComputeGradients(batches.a(), 1.0f).ok());
  replay.SetLossScale(4);
  ASSERT_TRUE(replay.ComputeGradients(batches.a(), 0).ok());
  EXPECT_TRUE(listener.reports.empty());
  replay.SetLossScale(0);
  ASSERT_TRUE(replay.ComputeGradients(batches.a(), 0).ok());
  EXPECT_EQ(listener.reports.size(), 3u);
}

TEST(ReplayTrainable, EachLayerIsReportedNoEarlierThanItsShareOfTheStep) {
  Fixture f;
  const Batches batches;
  // forward 5 x 1 ms, backward 5 x 2 ms: a step of at least 15 ms.
  ReplayTrainable replay(*f.model, Times(0.001, 0.002));
  RecordingListener listener;
  replay.SetGradientListener(&listener);
  ASSERT_TRUE(replay.ComputeGradients(batches.a(), 0).ok());
  listener.reports.clear();
  for (int step = 0; step < 3; ++step) {
    listener.reports.clear();
    const Clock::time_point start = Clock::now();
    ASSERT_TRUE(replay.ComputeGradients(batches.b(), 0).ok());
    const Clock::duration took = Clock::now() - start;
    EXPECT_GE(took, std::chrono::milliseconds(15));
    ASSERT_EQ(listener.reports.size(), 3u);
    // dense4 after forward + its own backward; dense2 after two more layers'; embedding0 last.
    EXPECT_GE(listener.reports[0].at - start, std::chrono::milliseconds(7));
    EXPECT_GE(listener.reports[1].at - start, std::chrono::milliseconds(11));
    EXPECT_GE(listener.reports[2].at - start, std::chrono::milliseconds(15));
  }
}

TEST(ReplayTrainable, ScaledTimesKeepEachLayersShareAndSumToTheStep) {
  std::vector<LayerTime> measured = {{"dense0", 1, 3}, {"relu1", 0, 0}, {"dense2", 2, 4}};
  const std::vector<LayerTime> step = ScaleToStep(measured, 0.020);
  ASSERT_EQ(step.size(), 3u);
  EXPECT_DOUBLE_EQ(step[0].forward_seconds, 0.002);
  EXPECT_DOUBLE_EQ(step[0].backward_seconds, 0.006);
  EXPECT_DOUBLE_EQ(step[1].backward_seconds, 0);
  EXPECT_DOUBLE_EQ(step[2].forward_seconds, 0.004);
  EXPECT_DOUBLE_EQ(step[2].backward_seconds, 0.008);
  EXPECT_EQ(step[2].layer, "dense2");
  EXPECT_EQ(DescribeReplay(step),
            "20.000 ms/step (forward 6.000, backward 14.000; per layer ms forward/backward: "
            "dense0 2.000/6.000, relu1 0.000/0.000, dense2 4.000/8.000)");
  // Nothing measured: the step's time split evenly over backward.
  const std::vector<LayerTime> even = ScaleToStep({{"a", 0, 0}, {"b", 0, 0}}, 0.010);
  EXPECT_DOUBLE_EQ(even[0].backward_seconds, 0.005);
  EXPECT_DOUBLE_EQ(even[1].backward_seconds, 0.005);
  EXPECT_DOUBLE_EQ(even[1].forward_seconds, 0);
}

}  // namespace
}  // namespace psflow
