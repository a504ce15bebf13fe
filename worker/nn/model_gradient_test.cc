// Backward passes checked against central finite differences of the loss: every parameter of a
// small model, for each activation kind, and the input gradient through stacked layers.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "worker/models/model_zoo.h"
#include "worker/models/reference_models.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/model.h"

namespace psflow::nn {
namespace {

double ErrorOn(const ModelSpec& spec, int64_t batch) {
  auto error = MaxGradientError(spec, RandomInput(spec, batch, 1, 11));
  EXPECT_TRUE(error.ok()) << error.status();
  return error.value_or(1.0);
}

ModelSpec SmallModel(ActivationKind kind) {
  return ModelSpec{.name = "small",
                   .input_shape = {6},
                   .num_classes = 4,
                   .layers = {DenseSpec{5}, ActivationSpec{kind}, DenseSpec{4}}};
}

TEST(ModelGradient, DenseSigmoidMatchesFiniteDifferences) {
  EXPECT_LT(ErrorOn(SmallModel(ActivationKind::kSigmoid), 3), 2e-2);
}

TEST(ModelGradient, DenseTanhMatchesFiniteDifferences) {
  EXPECT_LT(ErrorOn(SmallModel(ActivationKind::kTanh), 3), 2e-2);
}

TEST(ModelGradient, DenseReluMatchesFiniteDifferences) {
  EXPECT_LT(ErrorOn(SmallModel(ActivationKind::kRelu), 3), 2e-2);
}

TEST(ModelGradient, TwoHiddenLayersPropagateInputGradients) {
  // The inner Dense must get dx from the outer layers: an error there shows up in its kernel.
  ModelSpec spec{.name = "deep",
                 .input_shape = {4},
                 .num_classes = 3,
                 .layers = {DenseSpec{5}, ActivationSpec{ActivationKind::kTanh}, DenseSpec{5},
                            ActivationSpec{ActivationKind::kSigmoid}, DenseSpec{3}}};
  EXPECT_LT(ErrorOn(spec, 4), 2e-2);
}

TEST(ModelGradient, MnistMlpShapesAndLossAtInit) {
  auto backend = MakeCpuBackend();
  auto model = Model::Create(models::MnistMlp(), *backend, 100);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& descs = (*model)->params().descs();
  ASSERT_EQ(descs.size(), 4u);
  EXPECT_EQ(descs[0].name, "dense0/kernel");
  EXPECT_EQ(descs[0].shape, (Shape{784, 100}));
  EXPECT_EQ(descs[3].shape, (Shape{10}));
  // With zero parameters every class is equally likely: loss = ln 10 exactly.
  const GradientCheckInput f = RandomInput(models::MnistMlp(), 100, 1, 5);
  const absl::StatusOr<double> loss =
      (*model)->ComputeGradients(Batch{f.inputs.data(), f.labels.data(), 100});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, std::log(10.0), 1e-5);
}

// Activations no heap can hold (the largest batch, 2^24, of 2^30 values each: 64 PiB, past any
// address space): one error naming the buffer, not an exception (nn/backend.h: Allocate returns
// null). A larger batch is refused before anything is built.
TEST(ModelGradient, ActivationsBeyondMemoryAreResourceExhausted) {
  auto backend = MakeCpuBackend();
  const ModelSpec wide{.name = "wide",
                       .input_shape = {int64_t{1} << 30},
                       .num_classes = 1 << 30,
                       .layers = {ActivationSpec{ActivationKind::kRelu}}};
  EXPECT_EQ(Model::Create(wide, *backend, Model::kMaxBatch + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' allocators abort on such a size (allocator_may_return_null=0)";
#endif
  auto model = Model::Create(wide, *backend, Model::kMaxBatch);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kResourceExhausted) << model.status();
  EXPECT_NE(model.status().message().find("out of device memory for the activations of the input"),
            std::string::npos)
      << model.status();
}

TEST(ModelGradient, RejectsModelsThatDoNotEndInTheClasses) {
  auto backend = MakeCpuBackend();
  ModelSpec spec = SmallModel(ActivationKind::kRelu);
  spec.num_classes = 7;
  auto model = Model::Create(spec, *backend, 2);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
}

// The CPU backend split over threads (its loops: im2col, pooling, LRN, the LSTM cell, softmax;
// OpenBLAS's products) computes what one thread does: each seed model's loss and gradients on 3
// threads (uneven ranges) against 1, within float rounding (OpenBLAS orders its sums by thread
// count: ~1e-7 relative).
TEST(ModelGradient, SeedModelsComputeTheSameOnThreeThreads) {
  for (auto [name, config] : {std::pair{"mnist_mlp", ""}, std::pair{"mnist_cnn", ""},
                              std::pair{"cifar10_cnn", ""}, std::pair{"ptb_lstm", "small"}}) {
    SCOPED_TRACE(name);
    absl::StatusOr<models::ModelDefinition> zoo = models::FindModel(name, config);
    ASSERT_TRUE(zoo.ok()) << zoo.status();
    const bool ptb = zoo->language_model();
    const int64_t batch = ptb ? 20 : 16;
    const GradientCheckInput in =
        RandomInput(zoo->spec, batch, ptb ? zoo->num_steps() : 1, 3, ptb ? 10000 : 0);
    std::vector<double> losses;
    std::vector<std::vector<float>> grads;
    for (int threads : {1, 3}) {
      std::unique_ptr<Backend> backend = MakeCpuBackend(threads);
      absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(zoo->spec, *backend, batch);
      ASSERT_TRUE(model.ok()) << model.status();
      (*model)->params().Initialize(7);
      (*model)->UploadParameters();
      const absl::StatusOr<double> loss =
          (*model)->ComputeGradients(Batch{in.inputs.data(), in.labels.data(), batch});
      ASSERT_TRUE(loss.ok()) << loss.status();
      losses.push_back(*loss);
      const std::span<const float> g = (*model)->params().grads();
      grads.emplace_back(g.begin(), g.end());
    }
    EXPECT_NEAR(losses[1], losses[0], 1e-6 * std::abs(losses[0]));
    ASSERT_EQ(grads[1].size(), grads[0].size());
    float largest = 0;
    for (float v : grads[0]) largest = std::max(largest, std::abs(v));
    for (size_t i = 0; i < grads[0].size(); ++i) {
      ASSERT_NEAR(grads[1][i], grads[0][i], 1e-5f * largest) << "parameter float " << i;
    }
  }
}

}  // namespace
}  // namespace psflow::nn
