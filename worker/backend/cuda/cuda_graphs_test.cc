// --cuda_graphs (Model::EnableGraphs) on a GPU: a model that records and replays its step trains
// exactly as one that runs every step eagerly, from the same parameters, seeds and batches. Needs
// a GPU: every test skips, saying why, where none is visible (this machine, CI).
//
// Tolerance: 1e-5 relative (losses; parameters against their largest magnitude). The graph runs
// the very kernels of the eager step, so the two differ only where the GPU's order of summation
// is not fixed: the embedding's scatter-add (atomicAdd over repeated ids), the global norm's sum
// and cuDNN algorithms that accumulate with atomics; those move the last bits of a float.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/backend/cuda/forced_lstm_path.h"
#include "worker/models/model_zoo.h"
#include "worker/models/reference_models.h"
#include "worker/nn/backend.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/model.h"

namespace psflow::nn {
namespace {

constexpr double kTolerance = 1e-5;
constexpr float kLearningRate = 0.05f;

double RelativeError(std::span<const float> got, std::span<const float> want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

// The MNIST CNN with dropout before its last layer (the zoo's has none).
ModelSpec MnistCnnWithDropout() {
  ModelSpec spec = models::MnistCnn();
  spec.layers.insert(spec.layers.end() - 1, DropoutSpec{0.5f});
  return spec;
}

// Two models of one spec, each on its own backend of GPU 0: `eager` runs every step eagerly,
// `graphs` has graphs enabled. Same initial parameters, dropout seed and batches.
class CudaGraphs : public testing::Test {
 protected:
  void SetUp() override {
    for (auto* b : {&eager_backend_, &graph_backend_}) {
      absl::StatusOr<std::unique_ptr<Backend>> gpu = MakeCudaBackend(0);
      if (!gpu.ok()) GTEST_SKIP() << "no GPU to test on: " << gpu.status().message();
      *b = *std::move(gpu);
    }
  }

  void Make(const ModelSpec& spec, int64_t batch) {
    spec_ = spec;
    auto eager = Model::Create(spec, *eager_backend_, batch, /*seed=*/9);
    auto graphs = Model::Create(spec, *graph_backend_, batch, /*seed=*/9);
    if (const std::string why = ForcedLstmPathRefused(eager.status()); !why.empty()) {
      GTEST_SKIP() << why;
    }
    ASSERT_TRUE(eager.ok()) << eager.status();
    ASSERT_TRUE(graphs.ok()) << graphs.status();
    eager_ = *std::move(eager);
    graphs_ = *std::move(graphs);
    eager_->params().Initialize(4);
    std::copy(eager_->params().values().begin(), eager_->params().values().end(),
              graphs_->params().values().begin());
    eager_->UploadParameters();
    graphs_->UploadParameters();
    graphs_->EnableGraphs();
    vocab_ = eager_->labels_per_example() > 1 ? spec.num_classes : 0;
  }

  // One step of `rows` rows on both models (the same random batch), then plain SGD on the host
  // and the upload, as a trainer would: later steps read the new parameters.
  void Step(int64_t rows, uint64_t seed, float clip_norm, double* eager_loss = nullptr,
            double* graph_loss = nullptr) {
    const GradientCheckInput in =
        RandomInput(spec_, rows, eager_->labels_per_example(), seed, vocab_);
    const Batch b{in.inputs.data(), in.labels.data(), rows};
    absl::StatusOr<double> el = eager_->ComputeGradients(b, clip_norm);
    absl::StatusOr<double> gl = graphs_->ComputeGradients(b, clip_norm);
    ASSERT_TRUE(el.ok()) << el.status();
    ASSERT_TRUE(gl.ok()) << gl.status();
    EXPECT_NEAR(*gl, *el, kTolerance * std::fabs(*el)) << "loss of step " << seed;
    EXPECT_LE(RelativeError(graphs_->params().grads(), eager_->params().grads()), kTolerance)
        << "gradients of step " << seed;
    for (Model* m : {eager_.get(), graphs_.get()}) {
      std::span<float> v = m->params().values();
      std::span<const float> g = m->params().grads();
      for (size_t i = 0; i < v.size(); ++i) v[i] -= kLearningRate * g[i];
      m->UploadParameters();
    }
    if (eager_loss != nullptr) *eager_loss = *el;
    if (graph_loss != nullptr) *graph_loss = *gl;
  }

  void ExpectSameParameters() {
    EXPECT_LE(RelativeError(graphs_->params().values(), eager_->params().values()), kTolerance);
  }

  std::unique_ptr<Backend> eager_backend_, graph_backend_;
  ModelSpec spec_;
  std::unique_ptr<Model> eager_, graphs_;
  int vocab_ = 0;
};

struct GraphsCase {
  const char* name;
  ModelSpec (*spec)();
  int64_t batch;
  float clip_norm;  // > 0: clipped on the device after the graph; 0: copies inside the graph
};

// ctest and gtest name the case, not its bytes.
void PrintTo(const GraphsCase& c, std::ostream* os) { *os << c.name; }

class CudaGraphsTrain : public CudaGraphs, public testing::WithParamInterface<GraphsCase> {};

TEST_P(CudaGraphsTrain, ReplaysTrainAsEagerStepsDo) {
  Make(GetParam().spec(), GetParam().batch);
  if (HasFatalFailure() || IsSkipped()) return;
  for (uint64_t step = 0; step < 8; ++step) {
    Step(GetParam().batch, 100 + step, GetParam().clip_norm);
    if (HasFatalFailure()) return;
    // The first full batch checks the graph; from then on it replays.
    ASSERT_EQ(graphs_->graph_state(), Model::GraphState::kReplaying) << "step " << step;
  }
  ExpectSameParameters();
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaGraphsTrain,
    testing::Values(GraphsCase{"ptb_lstm_small", [] { return SmallVocabularyPtb(1.0f); }, 20, 5.0f},
                    GraphsCase{"ptb_lstm_small_dropout", [] { return SmallVocabularyPtb(0.5f); },
                               20, 0.0f},
                    GraphsCase{"mnist_cnn_dropout", MnistCnnWithDropout, 32, 0.0f}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(CudaGraphs, AShortLastBatchRunsEagerlyAndTheGraphGoesOn) {
  Make(SmallVocabularyPtb(0.5f), 20);
  if (HasFatalFailure() || IsSkipped()) return;
  for (uint64_t step = 0; step < 3; ++step) Step(20, 200 + step, 5.0f);
  ASSERT_EQ(graphs_->graph_state(), Model::GraphState::kReplaying);
  Step(13, 210, 5.0f);  // the epoch's short last batch: eager, on the carried state's first rows
  Step(20, 211, 5.0f);  // and the graph again
  EXPECT_EQ(graphs_->graph_state(), Model::GraphState::kReplaying);
  ExpectSameParameters();
}

TEST_F(CudaGraphs, DropoutMasksDifferFromReplayToReplay) {
  const ModelSpec spec{.name = "dropout_dense",
                       .input_shape = {256},
                       .num_classes = 10,
                       .layers = {DropoutSpec{0.5f}, DenseSpec{10, Initializer::Uniform(0.5f),
                                                               Initializer::Uniform(0.5f)}}};
  Make(spec, 8);
  if (HasFatalFailure()) return;
  // The same batch every step: only the masks change the loss.
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    const GradientCheckInput in = RandomInput(spec_, 8, 1, 300, 0);
    const Batch b{in.inputs.data(), in.labels.data(), 8};
    absl::StatusOr<double> el = eager_->ComputeGradients(b, 0);
    absl::StatusOr<double> gl = graphs_->ComputeGradients(b, 0);
    ASSERT_TRUE(el.ok() && gl.ok());
    EXPECT_NEAR(*gl, *el, kTolerance * std::fabs(*el)) << "step " << step;
    losses.push_back(*gl);
  }
  ASSERT_EQ(graphs_->graph_state(), Model::GraphState::kReplaying);
  // Steps 1..3 are replays (step 0 the check): each drew its own mask.
  EXPECT_NE(losses[1], losses[2]);
  EXPECT_NE(losses[2], losses[3]);
}

}  // namespace
}  // namespace psflow::nn
