// Towers on CPU backends against one model on the whole batch: the same parameters, the same
// batch, the loss and every gradient equal up to the order of summation. (On GPUs:
// cuda_layers_test's TowersOnOneGpuMatchOneCpuModel.)
#include "worker/nn/towers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "core/optimizer.h"
#include "worker/models/model_zoo.h"
#include "worker/models/reference_models.h"
#include "worker/nn/gradient_check.h"
#include "worker/parameter_sync.h"

namespace psflow::nn {
namespace {

double RelativeError(std::span<const float> got, std::span<const float> want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

// PTB's test model, small: 2 LSTM layers of 8 units over 50 words (ids below 50), 5 time steps.
ModelSpec SmallLstm() {
  models::PtbConfig c = models::PtbConfigByName("test").value();
  c.num_layers = 2;
  c.hidden_size = 8;
  c.vocab_size = 50;
  return models::PtbLstm(c, 5);
}

// One CPU model and `n` CPU towers of `spec` with the same parameters.
class TowersTest : public testing::Test {
 protected:
  void Make(const ModelSpec& spec, int n, int64_t max_batch) {
    one_backend_ = MakeCpuBackend(1);
    for (int k = 0; k < n; ++k) backends_.push_back(MakeCpuBackend(1));
    std::vector<Backend*> raw;
    for (auto& b : backends_) raw.push_back(b.get());
    auto one = Model::Create(spec, *one_backend_, max_batch);
    auto towers = Towers::Create(spec, raw, max_batch);
    ASSERT_TRUE(one.ok()) << one.status();
    ASSERT_TRUE(towers.ok()) << towers.status();
    one_ = *std::move(one);
    towers_ = *std::move(towers);
    one_->params().Initialize(7);
    std::copy(one_->params().values().begin(), one_->params().values().end(),
              towers_->params().values().begin());
    towers_->params().ValuesChanged();
    spec_ = spec;
  }

  // One step of both on the same random batch; the loss and every gradient compared.
  void ExpectSameStep(int64_t batch, float clip, uint64_t seed, int vocab = 0) {
    const GradientCheckInput in =
        RandomInput(spec_, batch, one_->labels_per_example(), seed, vocab);
    const Batch b{in.inputs.data(), in.labels.data(), batch};
    absl::StatusOr<double> want = one_->ComputeGradients(b, clip);
    absl::StatusOr<double> got = towers_->ComputeGradients(b, clip);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    EXPECT_NEAR(*got, *want, 1e-5 * std::fabs(*want));
    EXPECT_LE(RelativeError(towers_->params().grads(), one_->params().grads()), 1e-5);
    for (size_t h = 0; h < spec_descs().size(); ++h) {
      if (!spec_descs()[h].sparse) continue;
      const auto got_rows = towers_->params().touched_rows(static_cast<int>(h));
      const auto want_rows = one_->params().touched_rows(static_cast<int>(h));
      EXPECT_EQ(std::vector<int64_t>(got_rows.begin(), got_rows.end()),
                std::vector<int64_t>(want_rows.begin(), want_rows.end()));
    }
  }

  const std::vector<ParameterDesc>& spec_descs() const { return one_->params().descs(); }

  ModelSpec spec_;
  std::unique_ptr<Backend> one_backend_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<Model> one_;
  std::unique_ptr<Towers> towers_;
};

TEST_F(TowersTest, TwoTowersOfTheMlpMatchOneModel) {
  Make(models::MnistMlp(), 2, 16);
  ASSERT_FALSE(HasFatalFailure());
  ExpectSameStep(16, 0, 1);
}

TEST_F(TowersTest, ThreeTowersSplitAnUnevenBatchAndClipTheAverage) {
  Make(models::MnistMlp(), 3, 16);
  ASSERT_FALSE(HasFatalFailure());
  // 7 rows: 3, 2, 2. The clip applies to the averaged gradient's global norm.
  ExpectSameStep(7, 0.05f, 2);
}

TEST_F(TowersTest, ATowerWithNoRowSitsTheStepOut) {
  Make(models::MnistMlp(), 2, 4);
  ASSERT_FALSE(HasFatalFailure());
  ExpectSameStep(1, 0, 3);
}

TEST_F(TowersTest, CnnTowersWithWeightDecayMatchOneModel) {
  Make(models::Cifar10Cnn(), 2, 4);
  ASSERT_FALSE(HasFatalFailure());
  ExpectSameStep(4, 0, 4);
}

// An embedding (sparse: the union of the towers' touched rows) and LSTM state carried over
// steps: each tower keeps the rows of its slice.
TEST_F(TowersTest, LstmTowersCarryTheirRowsStateAndUniteTheTouchedRows) {
  Make(SmallLstm(), 2, 6);
  ASSERT_FALSE(HasFatalFailure());
  for (uint64_t step = 0; step < 3; ++step) {
    ExpectSameStep(6, 1.0f, 10 + step, 50);
    ASSERT_FALSE(HasFatalFailure());
  }
  one_->ResetState();
  towers_->ResetState();
  ExpectSameStep(6, 1.0f, 20, 50);
}

// Loss scaling: backward on 1024 times the loss, gradients unscaled before the clip. Powers of two
// scale fp32 exactly, so the gradients equal an unscaled model's (weight decay included: its
// gradient is scaled with the rest).
TEST_F(TowersTest, LossScaledTowersAndModelMatchAnUnscaledModel) {
  Make(models::Cifar10Cnn(), 2, 4);
  ASSERT_FALSE(HasFatalFailure());
  const GradientCheckInput in = RandomInput(spec_, 4, 1, 40, 0);
  const Batch b{in.inputs.data(), in.labels.data(), 4};
  absl::StatusOr<double> want = one_->ComputeGradients(b, 0.5f);
  ASSERT_TRUE(want.ok());
  const std::vector<float> want_grads(one_->params().grads().begin(), one_->params().grads().end());
  one_->SetLossScale(1024);
  towers_->SetLossScale(1024);
  absl::StatusOr<double> scaled = one_->ComputeGradients(b, 0.5f);
  absl::StatusOr<double> got = towers_->ComputeGradients(b, 0.5f);
  ASSERT_TRUE(scaled.ok() && got.ok());
  EXPECT_DOUBLE_EQ(*scaled, *want);  // the loss is reported unscaled
  EXPECT_NEAR(*got, *want, 1e-5 * std::fabs(*want));
  EXPECT_TRUE(one_->last_step_finite());
  EXPECT_TRUE(towers_->last_step_finite());
  EXPECT_LE(RelativeError(one_->params().grads(), want_grads), 1e-6);
  EXPECT_LE(RelativeError(towers_->params().grads(), want_grads), 1e-5);
}

// Gradients that overflow under the scale: the step is reported not finite (and not clipped by
// an infinite norm); without a scale or clip nothing is measured, so it reports finite.
TEST_F(TowersTest, AnOverflowingScaleIsReportedByModelAndTowers) {
  ModelSpec spec{.name = "tiny", .input_shape = {3}, .num_classes = 2, .layers = {}};
  spec.layers.push_back(DenseSpec{.units = 2});
  Make(spec, 2, 4);
  ASSERT_FALSE(HasFatalFailure());
  const std::vector<float> inputs(12, 1e30f);  // dW = x^T dy: 1e30 * scale * ~0.1 / 4
  const std::vector<int32_t> labels = {0, 1, 0, 1};
  const Batch b{inputs.data(), labels.data(), 4};
  ASSERT_TRUE(one_->ComputeGradients(b, 0).ok());
  EXPECT_TRUE(one_->last_step_finite());
  for (Trainable* t :
       {static_cast<Trainable*>(one_.get()), static_cast<Trainable*>(towers_.get())}) {
    t->SetLossScale(1e12f);
    ASSERT_TRUE(t->ComputeGradients(b, 1.0f).ok());
    EXPECT_FALSE(t->last_step_finite());
    t->SetLossScale(1);
    ASSERT_TRUE(t->ComputeGradients(b, 1.0f).ok());
    EXPECT_TRUE(t->last_step_finite());
  }
  // Loss scaling on at a scale of exactly 1 (where a dynamic scale may back off to), no clip:
  // still checked. Off, nothing is measured.
  std::vector<float> broken = inputs;
  broken[0] = std::numeric_limits<float>::infinity();
  const Batch bad{broken.data(), labels.data(), 4};
  for (Trainable* t :
       {static_cast<Trainable*>(one_.get()), static_cast<Trainable*>(towers_.get())}) {
    t->SetLossScale(1);
    ASSERT_TRUE(t->ComputeGradients(bad, 0).ok());
    EXPECT_FALSE(t->last_step_finite());
    t->SetLossScale(0);
    ASSERT_TRUE(t->ComputeGradients(bad, 0).ok());
    EXPECT_TRUE(t->last_step_finite());
  }
}

// What a streaming step's listener heard: each handle, in the order told, with its host gradients
// (of a sparse parameter: its touched rows and their values) as they were when told, and the
// threads it was told on.
class HeardGradients final : public GradientListener {
 public:
  explicit HeardGradients(ParameterSet& params) : params_(params) {}
  void GradientsReady(ParameterSet::Handle first, ParameterSet::Handle last) override {
    if (firsts.empty()) {
      // What a ps client sizes its sparse sends on: every sparse parameter's rows, final now.
      for (size_t h = 0; h < params_.descs().size(); ++h) {
        if (!params_.descs()[h].sparse) continue;
        const std::span<const int64_t> r = params_.touched_rows(static_cast<int>(h));
        rows_at_first[static_cast<int>(h)].assign(r.begin(), r.end());
      }
    }
    firsts.push_back(first);
    threads.insert(std::this_thread::get_id());
    for (auto h = first; h < last; ++h) {
      order.push_back(h);
      const std::span<const float> g = params_.grad(h);
      values[h].assign(g.begin(), g.end());
      const std::span<const int64_t> r = params_.touched_rows(h);
      rows[h].assign(r.begin(), r.end());
    }
  }
  std::vector<int> firsts;  // each call's first handle
  std::vector<int> order;   // every handle told, in order
  std::map<int, std::vector<float>> values;
  std::map<int, std::vector<int64_t>> rows;
  std::map<int, std::vector<int64_t>> rows_at_first;  // at the step's first call
  std::set<std::thread::id> threads;

 private:
  ParameterSet& params_;
};

// A streaming step: every parameter is told once, a layer at a time from the last, on the
// caller's thread, and what it holds then is the reduced gradient, equal to one model's.
void ExpectStreamedAsOneModel(Model& one, Towers& towers, const ModelSpec& spec, int64_t batch,
                              uint64_t seed, int vocab = 0) {
  HeardGradients heard(towers.params());
  towers.SetGradientListener(&heard);
  const GradientCheckInput in = RandomInput(spec, batch, one.labels_per_example(), seed, vocab);
  const Batch b{in.inputs.data(), in.labels.data(), batch};
  absl::StatusOr<double> want = one.ComputeGradients(b, 0);
  absl::StatusOr<double> got = towers.ComputeGradients(b, 0);
  towers.SetGradientListener(nullptr);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  EXPECT_NEAR(*got, *want, 1e-5 * std::fabs(*want));
  EXPECT_TRUE(towers.last_step_finite());
  const auto& descs = one.params().descs();
  std::vector<int> every(descs.size());
  for (size_t h = 0; h < descs.size(); ++h) every[h] = static_cast<int>(h);
  std::vector<int> sorted = heard.order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, every) << "each parameter told once";
  EXPECT_TRUE(std::is_sorted(heard.firsts.rbegin(), heard.firsts.rend())) << "the last layer first";
  EXPECT_GT(heard.firsts.size(), 1u) << "a layer at a time, not all at once";
  EXPECT_EQ(heard.threads, std::set<std::thread::id>{std::this_thread::get_id()});
  for (size_t i = 0; i < descs.size(); ++i) {
    const int h = static_cast<int>(i);
    SCOPED_TRACE(descs[i].name);
    const std::span<const float> g = one.params().grad(h);
    if (!descs[i].sparse) {
      EXPECT_LE(RelativeError(heard.values[h], g), 1e-5);
      continue;
    }
    const std::span<const int64_t> r = one.params().touched_rows(h);
    ASSERT_EQ(heard.rows[h], std::vector<int64_t>(r.begin(), r.end()));
    EXPECT_EQ(heard.rows_at_first[h], heard.rows[h]) << "the union before the first layer told";
    const auto width = static_cast<size_t>(descs[i].row_width());
    for (int64_t row : heard.rows[h]) {
      const size_t at = static_cast<size_t>(row) * width;
      EXPECT_LE(RelativeError(std::span<const float>(heard.values[h]).subspan(at, width),
                              g.subspan(at, width)),
                1e-5)
          << "row " << row;
    }
  }
}

TEST_F(TowersTest, StreamingTowersTellEachLayerItsSumAsOneModelHasIt) {
  Make(models::MnistMlp(), 3, 16);
  ASSERT_FALSE(HasFatalFailure());
  ExpectStreamedAsOneModel(*one_, *towers_, spec_, 7, 50);  // 3, 2, 2 rows
  ASSERT_FALSE(HasFatalFailure());
  ExpectStreamedAsOneModel(*one_, *towers_, spec_, 1, 51);  // towers 1 and 2 sit it out
}

TEST_F(TowersTest, StreamingCnnTowersMatchOneModel) {
  Make(models::Cifar10Cnn(), 2, 4);
  ASSERT_FALSE(HasFatalFailure());
  ExpectStreamedAsOneModel(*one_, *towers_, spec_, 4, 52);
}

// The embedding (sparse): its rows are the union when told, its row values the sum.
TEST_F(TowersTest, StreamingLstmTowersTellTheUnionOfTheTouchedRows) {
  Make(SmallLstm(), 2, 6);
  ASSERT_FALSE(HasFatalFailure());
  for (uint64_t step = 0; step < 3; ++step) {
    ExpectStreamedAsOneModel(*one_, *towers_, spec_, 6, 60 + step, 50);
    ASSERT_FALSE(HasFatalFailure());
  }
}

// A tower whose slice it cannot take (a word id past the vocabulary in tower 1's rows) fails the
// step naming it, and the listener hears of nothing; the next step streams as usual.
TEST_F(TowersTest, AFailingTowerEndsTheTellingAndFailsTheStep) {
  Make(SmallLstm(), 2, 6);
  ASSERT_FALSE(HasFatalFailure());
  GradientCheckInput in = RandomInput(spec_, 6, one_->labels_per_example(), 70, 50);
  in.inputs[in.inputs.size() - 1] = 50;  // row 5: tower 1's (rows 3-5)
  HeardGradients heard(towers_->params());
  towers_->SetGradientListener(&heard);
  const absl::StatusOr<double> got =
      towers_->ComputeGradients(Batch{in.inputs.data(), in.labels.data(), 6}, 0);
  towers_->SetGradientListener(nullptr);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(std::string(got.status().message()).find("tower 1"), std::string::npos) << got.status();
  EXPECT_TRUE(heard.order.empty());
  // Tower 0 ran its slice (its LSTM state moved on): both start from zeros again.
  one_->ResetState();
  towers_->ResetState();
  ExpectStreamedAsOneModel(*one_, *towers_, spec_, 6, 71, 50);
}

// A step that clips (or scales the loss) needs every gradient first: it tells nobody, and its
// gradients are still the clipped sum.
TEST_F(TowersTest, AClippedStepTellsTheListenerNothing) {
  Make(models::MnistMlp(), 2, 16);
  ASSERT_FALSE(HasFatalFailure());
  HeardGradients heard(towers_->params());
  towers_->SetGradientListener(&heard);
  ExpectSameStep(16, 0.05f, 53);
  EXPECT_TRUE(heard.order.empty());
  towers_->SetGradientListener(nullptr);
}

// Training alone (LocalUpdate), towers make their update as one model does (Trainable::
// MakeUpdate; on the CPU over the host values, which each tower takes at its next step): five
// momentum steps of both on the same batches agree in every step's loss and gradients (so every
// tower computed on the updated values) and in the values at the end.
TEST_F(TowersTest, TowersUpdateAsOneModel) {
  Make(SmallLstm(), 2, 8);
  ASSERT_FALSE(HasFatalFailure());
  proto::OptimizerConfig config;
  config.set_name("momentum");
  config.set_learning_rate(0.5f);
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(config);
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  auto one_update = one_->MakeUpdate(**optimizer);
  auto towers_update = towers_->MakeUpdate(**optimizer);
  ASSERT_TRUE(one_update.ok() && towers_update.ok());
  EXPECT_FALSE((*towers_update)->on_device());
  for (int64_t step = 1; step <= 5; ++step) {
    ExpectSameStep(8, 1.0f, 40 + static_cast<uint64_t>(step), 50);
    (*one_update)->Apply(one_->params(), 0.5f, step);
    (*towers_update)->Apply(towers_->params(), 0.5f, step);
  }
  EXPECT_LE(RelativeError(towers_->params().values(), one_->params().values()), 1e-5);
  EXPECT_TRUE(towers_->DownloadParameters().ok());  // nothing to bring: the CPU's are the host's
}

// A CPU backend whose update says it runs on a device and, as a GPU's does, writes the values
// without saying so (no ValuesChanged): the towers' path for an update on the device, with CPU
// layers. Counts its broadcasts.
class PretendDeviceBackend final : public Backend {
 public:
  Device device() const override { return cpu_->device(); }
  absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerSpec& spec,
                                                   std::string name) override {
    return cpu_->MakeLayer(spec, std::move(name));
  }
  std::unique_ptr<SoftmaxCrossEntropy> MakeSoftmaxCrossEntropy() override {
    return cpu_->MakeSoftmaxCrossEntropy();
  }
  void CopyToDevice(const float* host, float* device, int64_t floats) override {
    std::copy_n(host, floats, device);
  }
  absl::StatusOr<std::unique_ptr<ParameterUpdate>> MakeUpdate(const Optimizer&,
                                                              ParameterSet&) override {
    return std::make_unique<SilentSgd>();
  }
  void BroadcastParameters(ParameterSet& from, std::span<ParameterSet* const> to,
                           std::span<Backend* const> to_backends) override {
    ++broadcasts;
    Backend::BroadcastParameters(from, to, to_backends);
  }
  int broadcasts = 0;

 protected:
  float* AllocateRaw(int64_t floats) override {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(floats, 16)) * sizeof(float);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p != nullptr) std::memset(p, 0, bytes);
    return static_cast<float*>(p);
  }
  void Free(float* p) const override { std::free(p); }

 private:
  // SGD at the given rate over the dense parameters and the sparse ones' touched rows.
  class SilentSgd final : public ParameterUpdate {
   public:
    bool on_device() const override { return true; }
    void Apply(ParameterSet& params, float learning_rate, int64_t) override {
      for (const ParameterDesc& d : params.descs()) {
        const auto run = [&](int64_t begin, int64_t size) {
          for (int64_t i = begin; i < begin + size; ++i) {
            params.values()[static_cast<size_t>(i)] -=
                learning_rate * params.grads()[static_cast<size_t>(i)];
          }
        };
        if (!d.sparse) {
          run(d.offset, d.size);
          continue;
        }
        for (const int64_t r : d.touched_rows) run(d.offset + r * d.row_width(), d.row_width());
      }
    }
  };
  std::unique_ptr<Backend> cpu_ = MakeCpuBackend(1);
};

// Towers whose update runs "on the device" through LocalUpdate, against one CPU model updating
// on the host (SGD, clipped): while the update lives the towers finish their sum where it is
// (kOnDevice), each Push broadcasts tower 0's values once (without it the other towers, whose
// host values say nothing changed, would compute on old values: every step's loss and gradients
// are compared), a second Prepare keeps all that, and it ends with the update.
TEST(TowersUpdate, TowersUpdatePretendingToBeOnADevice) {
  const ModelSpec spec = SmallLstm();
  auto one_backend = MakeCpuBackend(1);
  std::vector<std::unique_ptr<PretendDeviceBackend>> owned;
  std::vector<Backend*> backends;
  for (int k = 0; k < 3; ++k) {
    owned.push_back(std::make_unique<PretendDeviceBackend>());
    backends.push_back(owned.back().get());
  }
  auto one = Model::Create(spec, *one_backend, 9);
  auto towers = Towers::Create(spec, backends, 9);
  ASSERT_TRUE(one.ok() && towers.ok()) << towers.status();
  (*one)->params().Initialize(7);
  (*towers)->params().CopyValuesFrom((*one)->params());
  TrainingConfig config;
  config.optimizer.set_name("sgd");
  config.optimizer.set_learning_rate(0.5f);
  auto host = LocalUpdate::Create(config);
  auto device = LocalUpdate::Create(config, towers->get());
  ASSERT_TRUE(host.ok() && device.ok());
  ASSERT_TRUE((*host)->Prepare((*one)->params(), true).ok());
  ASSERT_TRUE((*device)->Prepare((*towers)->params(), true).ok());
  ASSERT_TRUE((*device)->Prepare((*towers)->params(), true).ok());  // a second one
  EXPECT_TRUE((*device)->on_device());
  EXPECT_EQ((*towers)->tower(0).Finish(1.0f).where, GradientFinish::Where::kOnDevice);
  for (uint64_t step = 0; step < 5; ++step) {
    const GradientCheckInput in = RandomInput(spec, 9, (*one)->labels_per_example(), 80 + step, 50);
    const Batch b{in.inputs.data(), in.labels.data(), 9};
    absl::StatusOr<double> want = (*one)->ComputeGradients(b, 1.0f);
    absl::StatusOr<double> got = (*towers)->ComputeGradients(b, 1.0f);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    EXPECT_NEAR(*got, *want, 1e-5 * std::fabs(*want)) << "step " << step;
    EXPECT_LE(RelativeError((*towers)->params().grads(), (*one)->params().grads()), 1e-5)
        << "step " << step;
    ASSERT_TRUE((*host)->Push((*one)->params(), 9).ok());
    ASSERT_TRUE((*device)->Push((*towers)->params(), 9).ok());
  }
  EXPECT_EQ(owned[0]->broadcasts, 5);
  ASSERT_TRUE((*device)->Flush((*towers)->params()).ok());
  EXPECT_LE(RelativeError((*towers)->params().values(), (*one)->params().values()), 1e-5);
  device->reset();
  EXPECT_EQ((*towers)->tower(0).Finish(1.0f).where, GradientFinish::Where::kToHost);
}

// The default broadcast (a backend whose device values are the host's): every set gets the
// first's values.
TEST(Backend, BroadcastParametersCopiesTheValuesToEverySet) {
  auto backend = MakeCpuBackend(1);
  std::vector<std::unique_ptr<ParameterSet>> sets;
  for (int k = 0; k < 3; ++k) {
    sets.push_back(std::make_unique<ParameterSet>());
    sets.back()->Declare("w", {4, 5}, Initializer::Uniform(1.0f));
    sets.back()->Finalize();
    sets.back()->Initialize(static_cast<uint64_t>(k));
  }
  std::vector<ParameterSet*> to = {sets[1].get(), sets[2].get()};
  std::vector<Backend*> backends = {backend.get(), backend.get()};
  backend->BroadcastParameters(*sets[0], to, backends);
  for (int k = 1; k < 3; ++k) {
    EXPECT_TRUE(std::equal(sets[0]->values().begin(), sets[0]->values().end(),
                           sets[static_cast<size_t>(k)]->values().begin()));
  }
}

}  // namespace
}  // namespace psflow::nn
