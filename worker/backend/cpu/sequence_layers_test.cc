// The language model's layers on the CPU: embedding, dropout and LSTM, against finite
// differences and against their definitions.
#include <gtest/gtest.h>

#include <cmath>

#include "worker/nn/gradient_check.h"
#include "worker/nn/model.h"

namespace psflow::nn {
namespace {

constexpr int kVocab = 7;

// embedding -> [dropout] -> lstm -> [dropout] -> lstm -> dense over the vocabulary, per step.
ModelSpec TinyLanguageModel(int steps, float keep_prob, float forget_bias = 0.0f) {
  ModelSpec spec{.name = "tiny_lm", .input_shape = {steps}, .num_classes = kVocab, .layers = {}};
  const Initializer init = Initializer::Uniform(0.5f);
  spec.layers.push_back(EmbeddingSpec{kVocab, 3, init});
  if (keep_prob < 1) spec.layers.push_back(DropoutSpec{keep_prob});
  spec.layers.push_back(LstmSpec{4, forget_bias, init});
  if (keep_prob < 1) spec.layers.push_back(DropoutSpec{keep_prob});
  spec.layers.push_back(LstmSpec{3, forget_bias, init});
  spec.layers.push_back(DenseSpec{kVocab, init, init});
  return spec;
}

double ErrorOn(const ModelSpec& spec, int64_t batch, int steps) {
  GradientCheckOptions options;
  options.step = 1e-2f;
  auto error = MaxGradientError(spec, RandomInput(spec, batch, steps, 3, kVocab), options);
  EXPECT_TRUE(error.ok()) << error.status();
  return error.value_or(1.0);
}

TEST(SequenceLayers, LstmStackMatchesFiniteDifferences) {
  EXPECT_LT(ErrorOn(TinyLanguageModel(4, 1.0f), 3, 4), 5e-3);
}

TEST(SequenceLayers, LstmWithForgetBiasMatchesFiniteDifferences) {
  EXPECT_LT(ErrorOn(TinyLanguageModel(3, 1.0f, 1.0f), 2, 3), 5e-3);
}

TEST(SequenceLayers, DropoutMatchesFiniteDifferencesWithItsMask) {
  EXPECT_LT(ErrorOn(TinyLanguageModel(3, 0.6f), 2, 3), 5e-3);
}

TEST(SequenceLayers, OneTimeStepMatchesFiniteDifferences) {
  // The seed's test-set model: batch 1, one step.
  EXPECT_LT(ErrorOn(TinyLanguageModel(1, 1.0f), 1, 1), 5e-3);
}

// Runs `ids` (batch 1) through a model of `steps` steps per call, call after call, carrying
// the LSTM state; returns the summed loss.
double SummedLoss(int steps, const std::vector<float>& ids, const std::vector<int32_t>& labels) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(TinyLanguageModel(steps, 1.0f), *backend, 1);
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->params().Initialize(5);
  double sum = 0;
  for (size_t at = 0; at < ids.size(); at += static_cast<size_t>(steps)) {
    sum += (*model)->Evaluate(Batch{ids.data() + at, labels.data() + at, 1})->loss_sum;
  }
  return sum;
}

TEST(SequenceLayers, StateCarriesFromCallToCall) {
  const std::vector<float> ids = {1, 4, 2, 6, 0, 3, 5, 1};
  const std::vector<int32_t> labels = {4, 2, 6, 0, 3, 5, 1, 2};
  const double whole = SummedLoss(8, ids, labels);
  // Eight one-step calls and two four-step calls see the same sequence as one call.
  EXPECT_NEAR(SummedLoss(1, ids, labels), whole, 1e-4 * whole);
  EXPECT_NEAR(SummedLoss(4, ids, labels), whole, 1e-4 * whole);
}

TEST(SequenceLayers, ResetStateStartsFromZeros) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(TinyLanguageModel(2, 1.0f), *backend, 1);
  ASSERT_TRUE(model.ok());
  (*model)->params().Initialize(5);
  const std::vector<float> ids = {3, 1};
  const std::vector<int32_t> labels = {1, 5};
  const Batch b{ids.data(), labels.data(), 1};
  const double first = (*model)->Evaluate(b)->loss_sum;
  const double carried = (*model)->Evaluate(b)->loss_sum;
  (*model)->ResetState();
  EXPECT_NE(first, carried);
  EXPECT_EQ((*model)->Evaluate(b)->loss_sum, first);
}

TEST(SequenceLayers, EmbeddingReportsTouchedRowsSortedAndUnique) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(TinyLanguageModel(3, 1.0f), *backend, 2);
  ASSERT_TRUE(model.ok());
  ParameterSet& p = (*model)->params();
  p.Initialize(1);
  const std::vector<float> ids = {5, 2, 5, 0, 2, 2};
  const std::vector<int32_t> labels(6, 1);
  ASSERT_TRUE((*model)->ComputeGradients(Batch{ids.data(), labels.data(), 2}).ok());
  ASSERT_TRUE(p.sparse(0));
  const auto rows = p.touched_rows(0);
  EXPECT_EQ(std::vector<int64_t>(rows.begin(), rows.end()), (std::vector<int64_t>{0, 2, 5}));
  // Untouched rows get no gradient.
  for (int c = 0; c < 3; ++c) EXPECT_EQ(p.grad(0)[1 * 3 + c], 0.0f);
  EXPECT_NE(p.grad(0)[5 * 3], 0.0f);
}

TEST(SequenceLayers, DropoutKeepsTheStatedFractionScaled) {
  ModelSpec spec{
      .name = "drop", .input_shape = {1000}, .num_classes = 1000, .layers = {DropoutSpec{0.25f}}};
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(spec, *backend, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  // All inputs 1: inference gives uniform logits; training gives 4 (kept, 1 / 0.25) or 0.
  std::vector<float> x(10000, 1.0f);
  std::vector<int32_t> labels(10, 0);
  const double eval = (*model)->Evaluate(Batch{x.data(), labels.data(), 10})->loss_sum;
  EXPECT_NEAR(eval, 10 * std::log(1000.0), 1e-3);  // identity: uniform logits
  // A row with k kept has loss log(k e^4 + 1000 - k) - logit[label]: bound k in [230, 270].
  const absl::StatusOr<double> loss =
      (*model)->ComputeGradients(Batch{x.data(), labels.data(), 10});
  ASSERT_TRUE(loss.ok()) << loss.status();
  auto row_loss = [](double k, double logit) {
    return std::log(k * std::exp(4.0) + 1000 - k) - logit;
  };
  EXPECT_GT(*loss, row_loss(230, 4.0));
  EXPECT_LT(*loss, row_loss(270, 0.0));
}

}  // namespace
}  // namespace psflow::nn
