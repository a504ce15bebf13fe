#include "worker/background_exchange.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "worker/data/prefetcher.h"
#include "worker/data/synthetic.h"
#include "worker/nn/backend.h"
#include "worker/nn/counting_host_memory.h"
#include "worker/nn/model.h"
#include "worker/overlapped_sync.h"
#include "worker/trainer.h"

namespace psflow {
namespace {

// A ps stand-in in memory: Pull fills every value with the number of pushes so far, Push
// records the gradients it was given. Fails the test if two calls ever overlap.
class RecordingSync final : public ParameterSync {
 public:
  absl::Status Prepare(const nn::ParameterSet&, bool) override { return absl::OkStatus(); }

  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override {
    Enter("pull");
    pull_threads.push_back(std::this_thread::get_id());
    if (!pull_error.ok()) return Leave(pull_error);
    for (float& v : params.values()) v = static_cast<float>(pushes.size());
    return Leave(SyncResult{.global_step = static_cast<int64_t>(pushes.size()), .bytes = 8});
  }

  absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t examples) override {
    Enter("push");
    if (push_delay.count() > 0) std::this_thread::sleep_for(push_delay);
    push_threads.push_back(std::this_thread::get_id());
    if (!push_error.ok()) return Leave(push_error);
    pushes.emplace_back(params.grads().begin(), params.grads().end());
    touched.clear();
    for (const auto& d : params.descs()) {
      if (d.sparse) touched.assign(d.touched_rows.begin(), d.touched_rows.end());
    }
    pushed_examples += examples;
    return Leave(SyncResult{.global_step = static_cast<int64_t>(pushes.size()), .bytes = 4});
  }

  absl::Status SetLearningRate(float rate) override {
    Enter("rate");
    rates.push_back(rate);
    return Leave(absl::OkStatus());
  }

  absl::Status Leave() override {
    Enter("leave");
    return Leave(absl::OkStatus());
  }

  std::vector<std::string> log;  // calls in order
  std::vector<std::vector<float>> pushes;
  std::vector<int64_t> touched;
  int64_t pushed_examples = 0;
  std::vector<float> rates;
  std::vector<std::thread::id> pull_threads, push_threads;
  absl::Status push_error, pull_error;
  std::chrono::milliseconds push_delay{0};

 private:
  void Enter(const char* what) {
    EXPECT_FALSE(busy_.exchange(true)) << what << " while another call was in progress";
    log.emplace_back(what);
  }
  template <class T>
  T Leave(T value) {
    busy_.store(false);
    return value;
  }
  std::atomic<bool> busy_{false};
};

std::unique_ptr<nn::ParameterSet> TwoParameters() {
  auto p = std::make_unique<nn::ParameterSet>();
  p->Declare("w", {2, 3}, nn::Initializer::Zeros());
  const auto e = p->Declare("emb", {4, 2}, nn::Initializer::Zeros());
  p->MarkSparse(e);
  p->Finalize();
  return p;
}

class HandOverTest : public ::testing::TestWithParam<HandOver> {};

TEST_P(HandOverTest, PushesTheGradientsAsHandedOverAndDeliversThePull) {
  RecordingSync sync;
  auto params = TwoParameters();
  BackgroundExchange exchange(sync, *params, GetParam());
  const float* grads_before = params->grads().data();
  const float* values_before = params->values().data();
  for (size_t i = 0; i < 6; ++i) params->grad(0)[i] = static_cast<float>(i + 1);
  for (float& g : params->grad(1)) g = 9;  // only rows 1 and 3 are pushed
  params->SetTouchedRows(1, {1, 3});
  exchange.Start(*params, 32);
  EXPECT_TRUE(exchange.in_flight());
  // A swap hands the buffer itself over; a copy keeps it.
  EXPECT_EQ(params->grads().data() != grads_before, GetParam() == HandOver::kSwap);
  // The trainer goes on computing: its buffers change while the push is in flight.
  for (float& g : params->grads()) g = -1;
  params->SetTouchedRows(1, {0});
  absl::StatusOr<Exchange> x = exchange.Finish(*params);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_FALSE(exchange.in_flight());
  EXPECT_EQ(sync.log, (std::vector<std::string>{"push", "pull"}));
  ASSERT_EQ(sync.pushes.size(), 1u);
  const std::vector<float>& pushed = sync.pushes[0];
  const int64_t emb = params->descs()[1].offset;
  EXPECT_EQ(std::vector<float>(pushed.begin(), pushed.begin() + 6),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // The embedding's touched rows, 1 and 3 (the others are never read: a copy leaves them 0, a
  // swap hands over whatever the buffer holds).
  EXPECT_EQ(
      (std::vector<float>{pushed[emb + 2], pushed[emb + 3], pushed[emb + 6], pushed[emb + 7]}),
      (std::vector<float>{9, 9, 9, 9}));
  EXPECT_EQ(sync.touched, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(sync.pushed_examples, 32);
  // The pull ran after the push: every value is 1 (one push so far), now in params.
  for (float v : params->value(0)) EXPECT_EQ(v, 1.0f);
  for (float v : params->value(1)) EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(x->pushed.global_step, 1);
  EXPECT_EQ(x->pulled.global_step, 1);
  EXPECT_EQ(x->pushed.bytes, 4);
  EXPECT_EQ(x->pulled.bytes, 8);
  EXPECT_GE(x->push_seconds, 0.0);
  ASSERT_EQ(sync.push_threads.size(), 1u);
  EXPECT_NE(sync.push_threads[0], std::this_thread::get_id());
  EXPECT_EQ(sync.pull_threads[0], sync.push_threads[0]);
  EXPECT_EQ(params->values().data() != values_before, GetParam() == HandOver::kSwap);
  // A second exchange: the buffers come back (swap), and the push is again what was handed over.
  for (float& g : params->grads()) g = 5;
  params->SetTouchedRows(1, {2});
  exchange.Start(*params, 1);
  ASSERT_TRUE(exchange.Finish(*params).ok());
  ASSERT_EQ(sync.pushes.size(), 2u);
  EXPECT_EQ(std::vector<float>(sync.pushes[1].begin(), sync.pushes[1].begin() + 6),
            std::vector<float>(6, 5.0f));
  EXPECT_EQ(sync.touched, (std::vector<int64_t>{2}));
  for (float v : params->values()) EXPECT_EQ(v, 2.0f);
  if (GetParam() == HandOver::kSwap) {
    EXPECT_EQ(params->grads().data(), grads_before);
    EXPECT_EQ(params->values().data(), values_before);
  }
}

std::string HandOverName(const ::testing::TestParamInfo<HandOver>& param) {
  return param.param == HandOver::kSwap ? "Swap" : "Copy";
}

INSTANTIATE_TEST_SUITE_P(BackgroundExchange, HandOverTest,
                         ::testing::Values(HandOver::kCopy, HandOver::kSwap), HandOverName);

// A GPU model's buffers are pinned; where the memory has no room for the exchange's pair, that
// pair is on the heap and a swap would leave the model's set there half the steps: the exchange
// copies instead. With room, it swaps, and its buffers are in the same memory.
TEST(BackgroundExchange, SwapsOnlyBuffersOfTheSameMemory) {
  for (const int capacity : {2, 4}) {
    SCOPED_TRACE(capacity == 2 ? "no room" : "room");
    nn::CountingHostMemory memory(capacity);
    std::unique_ptr<nn::ParameterSet> params = TwoParameters();
    ASSERT_TRUE(params->MoveHostBuffersTo(memory));
    const float* grads_before = params->grads().data();
    {
      RecordingSync sync;
      BackgroundExchange exchange(sync, *params, HandOver::kSwap);
      EXPECT_EQ(memory.given.size(), static_cast<size_t>(capacity));
      exchange.Start(*params, 1);
      EXPECT_EQ(params->grads().data() != grads_before, capacity == 4);
      ASSERT_TRUE(exchange.Finish(*params).ok());
      EXPECT_EQ(params->host_memory(), &memory);
    }
    params.reset();
    EXPECT_TRUE(memory.given.empty());
  }
}

TEST(BackgroundExchange, AFailedPushSkipsThePullAndLeavesTheValues) {
  RecordingSync sync;
  sync.push_error = absl::DeadlineExceededError("ps task 0 did not answer");
  auto params = TwoParameters();
  for (float& v : params->values()) v = 7;
  BackgroundExchange exchange(sync, *params);
  exchange.Start(*params, 1);
  absl::StatusOr<Exchange> x = exchange.Finish(*params);
  EXPECT_EQ(x.status(), sync.push_error);
  EXPECT_EQ(sync.log, (std::vector<std::string>{"push"}));
  for (float v : params->values()) EXPECT_EQ(v, 7.0f);
  // The next exchange starts clean.
  sync.push_error = absl::OkStatus();
  exchange.Start(*params, 1);
  EXPECT_TRUE(exchange.Finish(*params).ok());
}

TEST(BackgroundExchange, AFailedPullIsReturnedAndLeavesTheValues) {
  RecordingSync sync;
  sync.pull_error = absl::UnavailableError("ps task 1 is gone");
  auto params = TwoParameters();
  for (float& v : params->values()) v = 7;
  BackgroundExchange exchange(sync, *params);
  exchange.Start(*params, 1);
  EXPECT_EQ(exchange.Finish(*params).status(), sync.pull_error);
  for (float v : params->values()) EXPECT_EQ(v, 7.0f);
}

TEST(BackgroundExchange, DestroyingItWaitsForTheExchangeInFlight) {
  RecordingSync sync;
  sync.push_delay = std::chrono::milliseconds(50);
  auto params = TwoParameters();
  {
    BackgroundExchange exchange(sync, *params);
    exchange.Start(*params, 1);
  }
  // The push and its pull both finished before the destructor returned.
  EXPECT_EQ(sync.log, (std::vector<std::string>{"push", "pull"}));
  EXPECT_EQ(sync.pushes.size(), 1u);
}

// The trainer with overlap: every step's gradients are pushed once, off the trainer's thread;
// the learning rate and Leave are never sent while an exchange is in flight; the first and the
// final pull are the trainer's own.
TEST(TrainerOverlap, EveryStepPushedOnceAndControlCallsNeverOverlapAnExchange) {
  auto backend = nn::MakeCpuBackend(1);
  nn::ModelSpec spec{.name = "tiny", .input_shape = {4}, .num_classes = 3, .layers = {}};
  spec.layers.push_back(nn::DenseSpec{.units = 3});
  absl::StatusOr<std::unique_ptr<nn::Model>> model = nn::Model::Create(spec, *backend, 8);
  ASSERT_TRUE(model.ok()) << model.status();
  data::SyntheticShape shape{.example_elements = 4, .num_classes = 3, .batches_per_epoch = 5};
  data::Prefetcher input(std::make_unique<data::SyntheticSource>(shape, 8, 1));
  RecordingSync sync;
  sync.push_delay = std::chrono::milliseconds(2);
  TrainerOptions options;
  options.train_epochs = 3;
  options.learning_rate = 0.1f;
  options.schedule = LearningRateSchedule{.decay = 0.5f, .first_decay_epoch = 1};
  options.log_every_steps = 0;
  OverlappedSync overlapped(sync, (*model)->params());
  Trainer trainer(**model, overlapped, input, options, nullptr);
  absl::StatusOr<TrainResult> r = trainer.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 15);
  EXPECT_EQ(sync.pushes.size(), 15u);
  EXPECT_EQ(sync.pushed_examples, 15 * 8);
  // The first pull, one after each push, and the final pull after Leave.
  ASSERT_EQ(sync.pull_threads.size(), 17u);
  EXPECT_EQ(sync.pull_threads.front(), std::this_thread::get_id());
  EXPECT_EQ(sync.pull_threads.back(), std::this_thread::get_id());
  for (const auto& id : sync.push_threads) EXPECT_NE(id, std::this_thread::get_id());
  EXPECT_EQ(sync.log.back(), "pull");
  EXPECT_EQ(sync.log[sync.log.size() - 2], "leave");
  EXPECT_EQ(sync.log[sync.log.size() - 3], "pull");
  EXPECT_EQ(sync.log[sync.log.size() - 4], "push");
  EXPECT_EQ(sync.rates.size(), 2u);  // epochs 2 and 3 decay
  EXPECT_EQ(r->global_step, 15);
  EXPECT_GT(r->exchange_seconds, 0.0);
  EXPECT_TRUE(std::isfinite(r->last_loss));
}

// A model whose steps are finite or not as scripted (a GPU's fp16 overflow, made to order): it
// records the loss scale of each step.
class ScriptedOverflow final : public nn::Trainable {
 public:
  ScriptedOverflow(nn::Model& model, std::vector<bool> finite)
      : model_(model), finite_(std::move(finite)) {}
  nn::ParameterSet& params() override { return model_.params(); }
  int64_t labels_per_example() const override { return model_.labels_per_example(); }
  absl::StatusOr<double> ComputeGradients(const nn::Batch& batch, float clip_norm) override {
    scales.push_back(scale_);
    last_finite_ = step_ < finite_.size() ? finite_[step_] : true;
    ++step_;
    return model_.ComputeGradients(batch, clip_norm);
  }
  void SetLossScale(float scale) override { scale_ = scale; }
  bool last_step_finite() const override { return last_finite_; }
  void ResetState() override { model_.ResetState(); }

  std::vector<float> scales;

 private:
  nn::Model& model_;
  std::vector<bool> finite_;
  size_t step_ = 0;
  float scale_ = 1;
  bool last_finite_ = true;
};

struct LossScaleRun {
  absl::StatusOr<TrainResult> result;
  RecordingSync sync;
  std::vector<float> scales;
};

void RunScripted(std::vector<bool> finite, nn::LossScaleOptions loss_scale, bool overlap,
                 int64_t max_skipped, LossScaleRun& run) {
  auto backend = nn::MakeCpuBackend(1);
  nn::ModelSpec spec{.name = "tiny", .input_shape = {4}, .num_classes = 3, .layers = {}};
  spec.layers.push_back(nn::DenseSpec{.units = 3});
  absl::StatusOr<std::unique_ptr<nn::Model>> model = nn::Model::Create(spec, *backend, 8);
  ASSERT_TRUE(model.ok()) << model.status();
  ScriptedOverflow scripted(**model, std::move(finite));
  data::SyntheticShape shape{.example_elements = 4, .num_classes = 3, .batches_per_epoch = 8};
  data::Prefetcher input(std::make_unique<data::SyntheticSource>(shape, 8, 1));
  TrainerOptions options;
  options.train_epochs = 1;
  options.learning_rate = 0.1f;
  options.log_every_steps = 0;
  options.loss_scale = loss_scale;
  options.max_skipped_in_a_row = max_skipped;
  OverlappedSync overlapped(run.sync, scripted.params());
  Trainer trainer(scripted, overlap ? static_cast<ParameterSync&>(overlapped) : run.sync, input,
                  options, nullptr);
  run.result = trainer.Run();
  run.scales = scripted.scales;
}

// Dynamic loss scaling through the trainer: a non-finite step is never pushed and halves the
// scale; `growth_interval` finite steps double it; serial and overlapped alike.
TEST(TrainerLossScale, SkipsNonFiniteStepsAndAdjustsTheScale) {
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap" : "serial");
    LossScaleRun run;
    RunScripted({true, false, false, true, true, true, false, true},
                nn::LossScaleOptions{nn::LossScaleOptions::Mode::kDynamic, 64.0f, 3}, overlap, 10,
                run);
    ASSERT_TRUE(run.result.ok()) << run.result.status();
    EXPECT_EQ(run.result->steps, 8);
    EXPECT_EQ(run.result->skipped_steps, 3);
    EXPECT_EQ(run.sync.pushes.size(), 5u);
    EXPECT_EQ(run.sync.pushed_examples, 5 * 8);
    EXPECT_EQ(run.scales, (std::vector<float>{64, 64, 32, 16, 16, 16, 32, 16}));
    EXPECT_FLOAT_EQ(run.result->loss_scale, 16.0f);
  }
}

TEST(TrainerLossScale, FailsAfterTooManyNonFiniteStepsInARow) {
  LossScaleRun run;
  RunScripted({true, false, false, false, true}, nn::LossScaleOptions{}, false, 3, run);
  ASSERT_FALSE(run.result.ok());
  EXPECT_EQ(run.result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(run.result.status().message().find("not finite in 3 steps in a row"), std::string::npos)
      << run.result.status();
  EXPECT_EQ(run.sync.pushes.size(), 1u);                    // only the first, finite step
  EXPECT_EQ(run.scales, (std::vector<float>{1, 1, 1, 1}));  // no scaling: 1 throughout
}

}  // namespace
}  // namespace psflow
