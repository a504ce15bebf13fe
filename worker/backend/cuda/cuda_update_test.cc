// The optimizers on the GPU (Backend::MakeUpdate, device_update.h) against core/optimizer's on
// the host: every rule on the same values and gradients, dense parameters and the touched rows of
// a sparse one, parameters longer than a tile and rows wider than one; and whole models trained
// with the update on the GPU against the same models updating on the host. Needs a GPU: every
// test skips, saying why, where none is visible (this machine, CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/optimizer.h"
#include "worker/backend/cuda/forced_lstm_path.h"
#include "worker/models/model_zoo.h"
#include "worker/models/reference_models.h"
#include "worker/nn/backend.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/model.h"
#include "worker/nn/parameter_update.h"
#include "worker/parameter_sync.h"

namespace psflow::nn {
namespace {

struct RuleCase {
  const char* name;
  const char* optimizer;
  bool nesterov_or_centered;
};
void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.name; }

proto::OptimizerConfig ConfigOf(const RuleCase& c) {
  proto::OptimizerConfig config;
  config.set_name(c.optimizer);
  config.set_learning_rate(0.05f);
  if (std::string(c.optimizer) == "momentum") config.set_use_nesterov(c.nesterov_or_centered);
  if (std::string(c.optimizer) == "rmsprop") {
    config.set_centered(c.nesterov_or_centered);
    config.set_momentum(0.5f);
  }
  return config;
}

// Relative difference of a and b in units of float's epsilon (2^-23) at the larger magnitude.
double Ulps(float a, float b) {
  const double scale =
      std::max({std::fabs(static_cast<double>(a)), std::fabs(static_cast<double>(b)), 1e-30});
  return std::fabs(static_cast<double>(a) - b) / (scale * 1.1920928955078125e-7);
}

class GpuUpdateRule : public testing::TestWithParam<RuleCase> {};

// Five steps of the rule on the GPU and on the host from the same values, each step with new
// gradients and new touched rows: the values agree to the last bit (the kernels round each
// operation as the CPU loops do; allowed: 1 ulp), and rows never touched keep their values.
TEST_P(GpuUpdateRule, MatchesTheCpuOptimizerElementForElement) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = MakeCudaBackend(0);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU to test on: " << gpu.status().message();
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(ConfigOf(GetParam()));
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();

  // Dense runs longer than a tile (4096) and not multiples of it, a sparse table whose rows are
  // wider than a tile, a small sparse table, and a dense parameter between the two.
  ParameterSet params;
  const auto wide = params.Declare("wide_rows", {6, 5000}, Initializer::Zeros());
  const auto kernel = params.Declare("kernel", {97, 103}, Initializer::Zeros());
  const auto rows = params.Declare("rows", {50, 9}, Initializer::Zeros());
  params.Declare("bias", {3}, Initializer::Zeros());
  params.MarkSparse(wide);
  params.MarkSparse(rows);
  params.Finalize();
  ASSERT_TRUE((*gpu)->AttachParameters(params).ok());
  std::unique_ptr<ParameterSet> host = ParameterSet::SameLayoutAs(params);

  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : params.values()) v = normal(rng);
  const std::vector<float> start(params.values().begin(), params.values().end());
  host->CopyValuesFrom(params);
  (*gpu)->UploadParameters(params);

  absl::StatusOr<std::unique_ptr<ParameterUpdate>> on_gpu = (*gpu)->MakeUpdate(**optimizer, params);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  ASSERT_TRUE((*on_gpu)->on_device());
  std::unique_ptr<ParameterUpdate> on_host = MakeHostUpdate(**optimizer, *host);

  const std::vector<std::vector<int64_t>> wide_touched = {{0, 3}, {3}, {}, {1, 2, 5}, {0}};
  const std::vector<std::vector<int64_t>> rows_touched = {{0, 1, 2, 49}, {7}, {7, 8}, {}, {49}};
  for (size_t step = 0; step < wide_touched.size(); ++step) {
    for (float& g : host->grads()) g = 0.1f * normal(rng);
    host->SetTouchedRows(wide, wide_touched[step]);
    host->SetTouchedRows(rows, rows_touched[step]);
    params.SetTouchedRows(wide, wide_touched[step]);
    params.SetTouchedRows(rows, rows_touched[step]);
    // Untouched rows' gradients are garbage on purpose: no rule may read them.
    (*gpu)->CopyToDevice(host->grads().data(), params.device_grads(), params.total_size());
    const float rate = 0.05f / static_cast<float>(step + 1);
    (*on_gpu)->Apply(params, rate, static_cast<int64_t>(step) + 1);
    on_host->Apply(*host, rate, static_cast<int64_t>(step) + 1);
  }
  ASSERT_TRUE((*gpu)->DownloadParameters(params).ok());

  double worst = 0;
  int64_t exact = 0, changed = 0;
  for (int64_t i = 0; i < params.total_size(); ++i) {
    const float a = params.values()[static_cast<size_t>(i)];
    const float b = host->values()[static_cast<size_t>(i)];
    worst = std::max(worst, Ulps(a, b));
    exact += a == b ? 1 : 0;
  }
  // Rows no step touched: wide row 4, rows 3..6 of the small table.
  const auto& d_wide = params.descs()[static_cast<size_t>(wide)];
  const auto& d_rows = params.descs()[static_cast<size_t>(rows)];
  for (int64_t j = 0; j < 5000; ++j) {
    const size_t i = static_cast<size_t>(d_wide.offset + 4 * 5000 + j);
    ASSERT_EQ(params.values()[i], start[i]) << "untouched wide row 4, column " << j;
  }
  for (int64_t j = 3 * 9; j < 7 * 9; ++j) {
    const size_t i = static_cast<size_t>(d_rows.offset + j);
    ASSERT_EQ(params.values()[i], start[i]) << "untouched small-table element " << j;
  }
  for (int64_t i = 0; i < params.total_size(); ++i) {
    changed += params.values()[static_cast<size_t>(i)] != start[static_cast<size_t>(i)] ? 1 : 0;
  }
  const auto& d_kernel = params.descs()[static_cast<size_t>(kernel)];
  EXPECT_GT(changed, d_kernel.size) << "the dense parameters must have moved";
  EXPECT_LE(worst, 1.0) << GetParam().name << ": " << exact << " of " << params.total_size()
                        << " values bit-identical";
  std::printf("%s: %ld of %ld values bit-identical to the CPU's, worst %.2f ulp\n", GetParam().name,
              static_cast<long>(exact), static_cast<long>(params.total_size()), worst);
  (*gpu)->DetachParameters(params);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, GpuUpdateRule,
    testing::Values(RuleCase{"sgd", "sgd", false}, RuleCase{"momentum", "momentum", false},
                    RuleCase{"nesterov", "momentum", true}, RuleCase{"adagrad", "adagrad", false},
                    RuleCase{"adam", "adam", false}, RuleCase{"rmsprop", "rmsprop", false},
                    RuleCase{"centered_rmsprop", "rmsprop", true}),
    [](const testing::TestParamInfo<RuleCase>& p) { return std::string(p.param.name); });

struct ModelCase {
  const char* name;
  ModelSpec (*spec)();
  int64_t batch;
  const char* optimizer;
  float clip_norm;  // > 0: the global norm is measured and clipped on the device
};
void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

class GpuUpdateModel : public testing::TestWithParam<ModelCase> {};

// LocalUpdate given the model (the update on its GPU, the gradients never on the host) against
// LocalUpdate on the host (gradients down, values up), same seeds and batches: after five steps
// and a Flush the host values agree within what the order of the device's atomic sums moves
// them, and before the Flush the host values had not moved.
TEST_P(GpuUpdateModel, TrainsAsTheUpdateOnTheHost) {
  const ModelCase& c = GetParam();
  absl::StatusOr<std::unique_ptr<Backend>> gpu = MakeCudaBackend(0);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU to test on: " << gpu.status().message();
  const ModelSpec spec = c.spec();
  auto device_model = Model::Create(spec, **gpu, c.batch, /*seed=*/3);
  if (const std::string why = ForcedLstmPathRefused(device_model.status()); !why.empty()) {
    GTEST_SKIP() << why;
  }
  ASSERT_TRUE(device_model.ok()) << device_model.status();
  auto host_model = Model::Create(spec, **gpu, c.batch, /*seed=*/3);
  ASSERT_TRUE(host_model.ok()) << host_model.status();

  TrainingConfig config;
  config.optimizer.set_name(c.optimizer);
  config.optimizer.set_learning_rate(0.1f);
  auto on_device = LocalUpdate::Create(config, device_model->get());
  auto on_host = LocalUpdate::Create(config);
  ASSERT_TRUE(on_device.ok() && on_host.ok());
  ParameterSet& p = (*device_model)->params();
  ParameterSet& q = (*host_model)->params();
  p.Initialize(5);
  q.Initialize(5);
  ASSERT_TRUE((*on_device)->Prepare(p, true).ok());
  ASSERT_TRUE((*on_host)->Prepare(q, true).ok());
  ASSERT_TRUE((*on_device)->on_device());
  const std::vector<float> initial(p.values().begin(), p.values().end());

  const int vocab = (*device_model)->labels_per_example() > 1 ? spec.num_classes : 0;
  for (uint64_t step = 0; step < 5; ++step) {
    const GradientCheckInput in =
        RandomInput(spec, c.batch, (*device_model)->labels_per_example(), 60 + step, vocab);
    const Batch b{in.inputs.data(), in.labels.data(), c.batch};
    absl::StatusOr<double> device_loss = (*device_model)->ComputeGradients(b, c.clip_norm);
    absl::StatusOr<double> host_loss = (*host_model)->ComputeGradients(b, c.clip_norm);
    ASSERT_TRUE(device_loss.ok()) << device_loss.status();
    ASSERT_TRUE(host_loss.ok()) << host_loss.status();
    EXPECT_NEAR(*device_loss, *host_loss, 1e-4 * std::fabs(*host_loss)) << "step " << step;
    ASSERT_TRUE((*on_device)->Push(p, c.batch).ok());
    ASSERT_TRUE((*on_host)->Push(q, c.batch).ok());
  }
  EXPECT_TRUE(std::equal(initial.begin(), initial.end(), p.values().begin()))
      << "the host values moved before Flush";
  ASSERT_TRUE((*on_device)->Flush(p).ok());

  double largest = 0, worst = 0, moved = 0;
  for (size_t i = 0; i < initial.size(); ++i) {
    largest = std::max(largest, std::fabs(static_cast<double>(q.values()[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(p.values()[i]) - q.values()[i]));
    moved = std::max(moved, std::fabs(static_cast<double>(q.values()[i]) - initial[i]));
  }
  EXPECT_GT(moved, 1e-4) << "training must have moved the parameters";
  EXPECT_LE(worst, 1e-5 * std::max(1.0, largest)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Models, GpuUpdateModel,
    testing::Values(ModelCase{"mnist_mlp_momentum", models::MnistMlp, 64, "momentum", 0},
                    ModelCase{"ptb_small_sgd_clipped", [] { return SmallVocabularyPtb(); }, 20,
                              "sgd", 5},
                    ModelCase{"ptb_small_momentum_clipped", [] { return SmallVocabularyPtb(); }, 20,
                              "momentum", 5}),
    [](const testing::TestParamInfo<ModelCase>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace psflow::nn
