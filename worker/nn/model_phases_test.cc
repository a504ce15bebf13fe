// Model's step phases on the CPU backend (worker/nn/layer.h: Prepare and SetLabels on the host,
// then Forward/Backward, then the finish): bad inputs stop a step before it runs, the loss is
// the one the rows' losses sum to, and --cuda_graphs on a backend that cannot record falls back
// to eager steps that are exactly the steps of a model without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "worker/nn/backend.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/model.h"
#include "worker/nn/recording_listener.h"

namespace psflow::nn {
namespace {

constexpr int kVocab = 12;

// Embedding, dropout, LSTM (carried state), dense logits per time step.
ModelSpec TinyLanguageModel(float keep_prob) {
  const Initializer init = Initializer::Uniform(0.5f);
  return ModelSpec{.name = "tiny_lm",
                   .input_shape = {4},
                   .num_classes = kVocab,
                   .layers = {EmbeddingSpec{kVocab, 3, init}, DropoutSpec{keep_prob},
                              LstmSpec{5, 0.0f, init}, DenseSpec{kVocab, init, init}}};
}

// A classifier over sequences: an LSTM, then one prediction per example.
ModelSpec TinySequenceClassifier() {
  const Initializer init = Initializer::Uniform(0.5f);
  return ModelSpec{.name = "tiny_sequence_classifier",
                   .input_shape = {4},
                   .num_classes = 3,
                   .layers = {EmbeddingSpec{kVocab, 3, init}, LstmSpec{5, 0.0f, init},
                              FlattenSpec{}, DenseSpec{3, init, init}}};
}

// A classifier's examples are independent: what a batch gives does not depend on the batches
// before it (the state was carried, so evaluating in other batch sizes gave other accuracies).
TEST(ModelPhases, AClassifierStartsEveryBatchFromZeroState) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(TinySequenceClassifier(), *backend, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->params().Initialize(1);
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> b = {11, 10, 9, 8, 7, 6, 5, 4};
  const std::vector<int32_t> labels = {0, 2};
  const auto eval = [&](const std::vector<float>& ids) {
    auto e = (*model)->Evaluate(Batch{ids.data(), labels.data(), 2});
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->loss_sum : -1.0;
  };
  const double first = eval(a);
  eval(b);
  EXPECT_EQ(eval(a), first);
  const absl::StatusOr<double> loss = (*model)->ComputeGradients(Batch{a.data(), labels.data(), 2});
  ASSERT_TRUE(loss.ok()) << loss.status();
  const absl::StatusOr<double> again =
      (*model)->ComputeGradients(Batch{a.data(), labels.data(), 2});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *loss);
}

// A language model's batches continue each other's sequences: the state goes on until reset.
TEST(ModelPhases, ALanguageModelCarriesItsStateFromBatchToBatch) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(TinyLanguageModel(1.0f), *backend, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->params().Initialize(1);
  const std::vector<float> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> labels(8, 1);
  const auto eval = [&] {
    auto e = (*model)->Evaluate(Batch{ids.data(), labels.data(), 2});
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->loss_sum : -1.0;
  };
  const double first = eval();
  EXPECT_NE(eval(), first);
  (*model)->ResetState();
  EXPECT_EQ(eval(), first);
}

TEST(ModelPhases, ATokenOutsideTheVocabularyStopsTheStepNamingTheLayer) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(TinyLanguageModel(1.0f), *backend, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->params().Initialize(1);
  const std::vector<float> ids = {1, 2, 3, 4, 5, kVocab, 0, 1};
  const std::vector<int32_t> labels(8, 1);
  const absl::StatusOr<double> loss =
      (*model)->ComputeGradients(Batch{ids.data(), labels.data(), 2});
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(loss.status().message());
  EXPECT_NE(message.find("embedding0"), std::string::npos) << message;
  EXPECT_NE(message.find("position 5"), std::string::npos) << message;
  // Evaluate checks the ids too.
  EXPECT_EQ((*model)->Evaluate(Batch{ids.data(), labels.data(), 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelPhases, ALabelOutsideTheClassesStopsTheStep) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(TinyLanguageModel(1.0f), *backend, 2);
  ASSERT_TRUE(model.ok());
  const std::vector<float> ids(8, 1.0f);
  std::vector<int32_t> labels(8, 1);
  labels[6] = -1;
  const absl::StatusOr<double> loss =
      (*model)->ComputeGradients(Batch{ids.data(), labels.data(), 2});
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(loss.status().message()).find("label -1 of row 6"), std::string::npos)
      << loss.status();
}

TEST(ModelPhases, TheLossIsTheRowsLossesSummedOverTheExamples) {
  // No dropout: a training step's loss is the inference loss per example.
  auto backend = MakeCpuBackend(1);
  auto train = Model::Create(TinyLanguageModel(1.0f), *backend, 3);
  auto eval = Model::Create(TinyLanguageModel(1.0f), *backend, 3);
  ASSERT_TRUE(train.ok() && eval.ok());
  (*train)->params().Initialize(2);
  (*eval)->params().Initialize(2);
  const GradientCheckInput in = RandomInput((*train)->spec(), 3, 4, 5, kVocab);
  const Batch b{in.inputs.data(), in.labels.data(), 3};
  const absl::StatusOr<double> loss = (*train)->ComputeGradients(b);
  const absl::StatusOr<SoftmaxCrossEntropy::Eval> e = (*eval)->Evaluate(b);
  ASSERT_TRUE(loss.ok() && e.ok());
  // The step scales the summed rows by 1 / examples in float, as the gradient.
  EXPECT_DOUBLE_EQ(*loss, e->loss_sum * (1.0f / 3));
  const auto rows = (*train)->params().touched_rows(0);
  std::vector<int64_t> want;
  for (float id : in.inputs) want.push_back(static_cast<int64_t>(id));
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  EXPECT_EQ(std::vector<int64_t>(rows.begin(), rows.end()), want);
}

TEST(ModelPhases, GraphsOnABackendThatCannotRecordRunEagerlyAsWithout) {
  auto backend = MakeCpuBackend(1);
  auto plain = Model::Create(TinyLanguageModel(0.6f), *backend, 3, /*seed=*/4);
  auto graphs = Model::Create(TinyLanguageModel(0.6f), *backend, 3, /*seed=*/4);
  ASSERT_TRUE(plain.ok() && graphs.ok());
  (*plain)->params().Initialize(3);
  (*graphs)->params().Initialize(3);
  (*graphs)->EnableGraphs();
  EXPECT_EQ((*graphs)->graph_state(), Model::GraphState::kUnchecked);
  for (uint64_t step = 0; step < 4; ++step) {
    const int64_t rows = step == 2 ? 2 : 3;  // a short batch among full ones
    const GradientCheckInput in = RandomInput((*plain)->spec(), rows, 4, 20 + step, kVocab);
    const Batch b{in.inputs.data(), in.labels.data(), rows};
    const absl::StatusOr<double> want = (*plain)->ComputeGradients(b, 1.0f);
    const absl::StatusOr<double> got = (*graphs)->ComputeGradients(b, 1.0f);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    EXPECT_EQ(*got, *want) << "step " << step;
    const auto g = (*graphs)->params().grads(), w = (*plain)->params().grads();
    EXPECT_TRUE(std::equal(g.begin(), g.end(), w.begin(), w.end())) << "step " << step;
  }
  EXPECT_EQ((*graphs)->graph_state(), Model::GraphState::kFailed);
}

ModelSpec ThreeDenseLayers() {
  const Initializer init = Initializer::Uniform(0.5f);
  return ModelSpec{.name = "mlp",
                   .input_shape = {5},
                   .num_classes = 3,
                   .layers = {DenseSpec{6, init, init}, ActivationSpec{ActivationKind::kRelu},
                              DenseSpec{4, init, init}, DenseSpec{3, init, init}}};
}

TEST(ModelPhases, AStreamingStepTellsEveryParameterOnceLastLayerFirstWithItsFinalGradient) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(ThreeDenseLayers(), *backend, 4);
  ASSERT_TRUE(model.ok()) << model.status();
  ParameterSet& params = (*model)->params();
  params.Initialize(2);
  RecordingListener listener(params);
  (*model)->SetGradientListener(&listener);
  const int handles = static_cast<int>(params.descs().size());
  for (uint64_t step = 0; step < 2; ++step) {
    listener.Clear();
    const GradientCheckInput in = RandomInput((*model)->spec(), 4, 1, 7 + step);
    ASSERT_TRUE((*model)->ComputeGradients(Batch{in.inputs.data(), in.labels.data(), 4}).ok());
    // Three dense layers, two parameters each (kernel, bias); the activation has none.
    ASSERT_EQ(listener.calls.size(), 3u);
    EXPECT_EQ(listener.BackwardOrderError(handles), "") << "step " << step;
    EXPECT_EQ(listener.SeenDiffersFromNow(), "") << "step " << step;
  }
}

TEST(ModelPhases, AClippedOrLossScaledStepTellsNothing) {
  auto backend = MakeCpuBackend(1);
  auto model = Model::Create(ThreeDenseLayers(), *backend, 4);
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->params().Initialize(2);
  RecordingListener listener((*model)->params());
  (*model)->SetGradientListener(&listener);
  const GradientCheckInput in = RandomInput((*model)->spec(), 4, 1, 9);
  const Batch b{in.inputs.data(), in.labels.data(), 4};
  ASSERT_TRUE((*model)->ComputeGradients(b, /*clip_norm=*/0.5f).ok());
  EXPECT_TRUE(listener.calls.empty());
  (*model)->SetLossScale(8);
  ASSERT_TRUE((*model)->ComputeGradients(b).ok());
  EXPECT_TRUE(listener.calls.empty());
  (*model)->SetLossScale(0);
  (*model)->SetGradientListener(nullptr);
  ASSERT_TRUE((*model)->ComputeGradients(b).ok());
  EXPECT_TRUE(listener.calls.empty());
}

}  // namespace
}  // namespace psflow::nn
