// Backward passes checked against central finite differences of the loss, in double-checked
// float: every parameter of a small model, for each activation kind, and the input gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "worker/models/model_zoo.h"
#include "worker/nn/model.h"

namespace psflow::nn {
namespace {

struct Fixture {
  std::vector<float> inputs;
  std::vector<int32_t> labels;
};

Fixture RandomBatch(int64_t batch, int64_t width, int classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Fixture f;
  for (int64_t i = 0; i < batch * width; ++i) f.inputs.push_back(u(rng));
  for (int64_t i = 0; i < batch; ++i) f.labels.push_back(static_cast<int32_t>(rng() % classes));
  return f;
}

// Max relative error between the analytic gradient and (L(w+h) - L(w-h)) / 2h over all params.
double MaxGradientError(const ModelSpec& spec, int64_t batch) {
  auto backend = MakeCpuBackend();
  auto model = Model::Create(spec, *backend, batch);
  EXPECT_TRUE(model.ok()) << model.status();
  ParameterSet& p = (*model)->params();
  p.Initialize(7);
  // Non-zero biases so their gradients matter.
  for (const auto& d : p.descs()) {
    if (d.shape.size() == 1) {
      for (int64_t i = 0; i < d.size; ++i) p.values()[d.offset + i] = 0.1f * std::sin(i + 1.0f);
    }
  }
  const Fixture f = RandomBatch(batch, NumElements(spec.input_shape), spec.num_classes, 11);
  const Batch b{f.inputs.data(), f.labels.data(), batch};
  (*model)->ComputeGradients(b);
  const std::vector<float> analytic(p.grads().begin(), p.grads().end());
  double worst = 0;
  const float h = 1e-2f;
  for (const auto& d : p.descs()) {
    for (int64_t i = 0; i < d.size; ++i) {
      float& w = p.values()[d.offset + i];
      const float saved = w;
      w = saved + h;
      const double up = (*model)->ComputeGradients(b);
      w = saved - h;
      const double down = (*model)->ComputeGradients(b);
      w = saved;
      const double numeric = (up - down) / (2.0 * h);
      const double a = analytic[d.offset + i];
      const double err = std::fabs(a - numeric) / std::max(1e-3, std::fabs(a) + std::fabs(numeric));
      worst = std::max(worst, err);
    }
  }
  return worst;
}

ModelSpec SmallModel(ActivationKind kind) {
  return ModelSpec{.name = "small",
                   .input_shape = {6},
                   .num_classes = 4,
                   .layers = {DenseSpec{5}, ActivationSpec{kind}, DenseSpec{4}}};
}

TEST(ModelGradient, DenseSigmoidMatchesFiniteDifferences) {
  EXPECT_LT(MaxGradientError(SmallModel(ActivationKind::kSigmoid), 3), 2e-2);
}

TEST(ModelGradient, DenseTanhMatchesFiniteDifferences) {
  EXPECT_LT(MaxGradientError(SmallModel(ActivationKind::kTanh), 3), 2e-2);
}

TEST(ModelGradient, DenseReluMatchesFiniteDifferences) {
  EXPECT_LT(MaxGradientError(SmallModel(ActivationKind::kRelu), 3), 2e-2);
}

TEST(ModelGradient, TwoHiddenLayersPropagateInputGradients) {
  // The inner Dense must get dx from the outer layers: an error there shows up in its kernel.
  ModelSpec spec{.name = "deep",
                 .input_shape = {4},
                 .num_classes = 3,
                 .layers = {DenseSpec{5}, ActivationSpec{ActivationKind::kTanh}, DenseSpec{5},
                            ActivationSpec{ActivationKind::kSigmoid}, DenseSpec{3}}};
  EXPECT_LT(MaxGradientError(spec, 4), 2e-2);
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
  const Fixture f = RandomBatch(100, 784, 10, 5);
  const float loss = (*model)->ComputeGradients(Batch{f.inputs.data(), f.labels.data(), 100});
  EXPECT_NEAR(loss, std::log(10.0), 1e-5);
}

TEST(ModelGradient, RejectsModelsThatDoNotEndInTheClasses) {
  auto backend = MakeCpuBackend();
  ModelSpec spec = SmallModel(ActivationKind::kRelu);
  spec.num_classes = 7;
  auto model = Model::Create(spec, *backend, 2);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psflow::nn
