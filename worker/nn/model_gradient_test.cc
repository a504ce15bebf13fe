// Backward passes checked against central finite differences of the loss: every parameter of a
// small model, for each activation kind, and the input gradient through stacked layers.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "worker/models/model_zoo.h"
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

TEST(ModelGradient, RejectsModelsThatDoNotEndInTheClasses) {
  auto backend = MakeCpuBackend();
  ModelSpec spec = SmallModel(ActivationKind::kRelu);
  spec.num_classes = 7;
  auto model = Model::Create(spec, *backend, 2);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psflow::nn
