// Towers that stream (--num_gpus, here on two CPU backends) through the whole worker: Trainer,
// PsClient and a real ps task on loopback, on both transports. PTB's test model, whose embedding
// is sparse, trains 8 steps with each layer's sum pushed as the towers make it; a single model
// trains the same steps against a ps of its own. The ps ends with the same parameters (up to
// the order of summation), and no push is refused. (That the embedding's touched rows are the
// towers' union before the first early send, as the client requires, is TowersTest's check: a
// client this small would not notice.)
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "ps/loopback_ps.h"
#include "worker/data/batch_source.h"
#include "worker/data/prefetcher.h"
#include "worker/models/reference_models.h"
#include "worker/nn/backend.h"
#include "worker/nn/model.h"
#include "worker/nn/towers.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"

namespace psflow {
namespace {

constexpr int kTowersVocab = 50;
constexpr int kSteps = 5;  // time steps per example
constexpr int64_t kTowersBatch = 6;

nn::ModelSpec SmallLstm() {
  models::PtbConfig c = models::PtbConfigByName("test").value();
  c.num_layers = 2;
  c.hidden_size = 8;
  c.vocab_size = kTowersVocab;
  return models::PtbLstm(c, kSteps);
}

// The same word ids for every run: batch b's ids are a fixed function of b.
class ScriptedWords final : public data::BatchSource {
 public:
  int64_t batches_per_epoch() const override { return 4; }
  void Fill(data::BatchBuffer& out) override {
    out.inputs.resize(kTowersBatch * kSteps);
    out.labels.resize(kTowersBatch * kSteps);
    for (int64_t i = 0; i < kTowersBatch * kSteps; ++i) {
      out.inputs[static_cast<size_t>(i)] = static_cast<float>((next_ * 13 + i * 7) % kTowersVocab);
      out.labels[static_cast<size_t>(i)] = static_cast<int32_t>((next_ * 5 + i * 3) % kTowersVocab);
    }
    out.size = kTowersBatch;
    ++next_;
  }

 private:
  int64_t next_ = 0;
};

// Trains `model` 8 steps against a ps task of its own; returns the parameters it pulled last.
std::vector<float> TrainThroughPs(nn::Trainable& model, Transport transport) {
  LoopbackPs ps;
  EXPECT_TRUE(ps.started());
  PsClient::Options o;
  o.transport = transport;
  o.ps_addresses = {ps.address()};
  o.connect_timeout = std::chrono::seconds(20);
  o.rpc_timeout = std::chrono::seconds(20);
  o.training.optimizer.set_name("sgd");
  o.training.optimizer.set_learning_rate(0.5f);
  o.training.sync.set_total_workers(1);
  auto client = PsClient::Create(o, model.params());
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return {};
  data::Prefetcher input(std::make_unique<ScriptedWords>());
  TrainerOptions options;
  options.train_steps = 8;
  options.log_every_steps = 0;
  options.learning_rate = 0.5f;
  Trainer trainer(model, **client, input, options, nullptr);
  absl::StatusOr<TrainResult> result = trainer.Run();
  EXPECT_TRUE(result.ok()) << result.status();
  const auto values = model.params().values();
  return std::vector<float>(values.begin(), values.end());
}

class TowersTraining : public ::testing::TestWithParam<Transport> {};

TEST_P(TowersTraining, StreamingTowersTrainAsOneModelThroughAPs) {
  const nn::ModelSpec spec = SmallLstm();
  std::unique_ptr<nn::Backend> one_backend = nn::MakeCpuBackend(1);
  absl::StatusOr<std::unique_ptr<nn::Model>> one =
      nn::Model::Create(spec, *one_backend, kTowersBatch);
  ASSERT_TRUE(one.ok()) << one.status();
  std::unique_ptr<nn::Backend> b0 = nn::MakeCpuBackend(1), b1 = nn::MakeCpuBackend(1);
  absl::StatusOr<std::unique_ptr<nn::Towers>> towers =
      nn::Towers::Create(spec, {b0.get(), b1.get()}, kTowersBatch);
  ASSERT_TRUE(towers.ok()) << towers.status();

  const std::vector<float> want = TrainThroughPs(**one, GetParam());
  const std::vector<float> got = TrainThroughPs(**towers, GetParam());
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(got.size(), want.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  EXPECT_LE(diff, 1e-5 * scale);
}

INSTANTIATE_TEST_SUITE_P(Transports, TowersTraining,
                         ::testing::Values(Transport::kBulk, Transport::kGrpc),
                         [](const ::testing::TestParamInfo<Transport>& p) {
                           return p.param == Transport::kBulk ? "Bulk" : "Grpc";
                         });

}  // namespace
}  // namespace psflow
