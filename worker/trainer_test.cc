// Trainer's overlap within a step: each streaming step hands every layer's final gradients to the
// ParameterSync before it pushes them, with the batch's size; a clipped step hands none, nor does
// a trainer told not to stream. A stop request (SIGTERM) ends training after the step in progress;
// a time budget ends it as its last step would.
#include "worker/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "worker/data/prefetcher.h"
#include "worker/data/synthetic.h"
#include "worker/nn/backend.h"
#include "worker/nn/model.h"
#include "worker/nn/towers.h"
#include "worker/worker_metrics.h"

namespace psflow {
namespace {

// Notes, per push, the parameters told ready before it and with how many examples.
class RecordingTrainerSync final : public ParameterSync {
 public:
  absl::Status Prepare(const nn::ParameterSet&, bool) override { return absl::OkStatus(); }
  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override {
    if (pull_nan) {  // a ps whose values went NaN
      params.values()[0] = std::numeric_limits<float>::quiet_NaN();
      params.ValuesChanged();
    }
    ++pulls;
    if (left) ++pulls_after_leave;
    return SyncResult{};
  }
  void GradientsReady(const nn::ParameterSet& params, nn::ParameterSet::Handle first,
                      nn::ParameterSet::Handle last, int64_t examples) override {
    ready_.resize(params.descs().size(), 0);
    for (auto h = first; h < last; ++h) ++ready_[static_cast<size_t>(h)];
    examples_.push_back(examples);
  }
  absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t examples) override {
    pushes.push_back({std::move(ready_), std::move(examples_), examples});
    ready_.clear();
    examples_.clear();
    (void)params;
    if (stop_at_push == static_cast<int>(pushes.size())) {
      stoppable_when_asked = stop.Request();  // SIGTERM mid-step
    }
    std::this_thread::sleep_for(push_takes);
    return SyncResult{};
  }
  absl::Status SetLearningRate(float) override { return absl::OkStatus(); }
  absl::Status Leave() override {
    left = true;
    return absl::OkStatus();
  }
  absl::StatusOr<Others> OthersTraining() override {
    ++others_asked;
    const int training = others.empty() ? 0 : others[std::min(others_asked, others.size()) - 1];
    return Others{training, moving_step ? static_cast<int64_t>(others_asked) : 7};
  }

  StopRequest stop;
  int stop_at_push = -1;  // requests `stop` during this push (1: the first)
  std::chrono::milliseconds push_takes{0};
  bool stoppable_when_asked = false;
  int pulls = 0;
  bool left = false;
  int pulls_after_leave = 0;
  bool pull_nan = false;
  std::vector<int> others;  // OthersTraining's answers in turn (the last one repeats)
  bool moving_step = true;  // OthersTraining's global step moves with each call (else stays 7)
  size_t others_asked = 0;

  struct PushSeen {
    std::vector<int> ready;              // per handle: times told ready before this push
    std::vector<int64_t> told_examples;  // each GradientsReady's examples
    int64_t examples = 0;
  };
  std::vector<PushSeen> pushes;

 private:
  std::vector<int> ready_;
  std::vector<int64_t> examples_;
};

struct TinyTraining {
  std::unique_ptr<nn::Backend> backend = nn::MakeCpuBackend(1);
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<data::Prefetcher> input;
  TinyTraining() {
    nn::ModelSpec spec{.name = "tiny", .input_shape = {16}, .num_classes = 4, .layers = {}};
    spec.layers.push_back(nn::DenseSpec{.units = 8});
    spec.layers.push_back(nn::DenseSpec{.units = 4});
    model = *nn::Model::Create(spec, *backend, 8);
    data::SyntheticShape shape{.example_elements = 16, .num_classes = 4, .batches_per_epoch = 10};
    input =
        std::make_unique<data::Prefetcher>(std::make_unique<data::SyntheticSource>(shape, 8, 1));
  }
};

TEST(Trainer, EachStepTellsTheSyncOfEveryParameterOnceBeforeItsPush) {
  TinyTraining s;
  RecordingTrainerSync sync;
  TrainerOptions options;
  options.train_steps = 3;
  options.log_every_steps = 0;
  {
    Trainer trainer(*s.model, sync, *s.input, options, nullptr);
    ASSERT_TRUE(trainer.Run().ok());
  }
  const size_t handles = s.model->params().descs().size();
  ASSERT_EQ(sync.pushes.size(), 3u);
  for (const auto& push : sync.pushes) {
    EXPECT_EQ(push.ready, std::vector<int>(handles, 1));
    EXPECT_EQ(push.told_examples, std::vector<int64_t>(2, 8));  // two layers, 8 examples each
    EXPECT_EQ(push.examples, 8);
  }
}

// Towers (--num_gpus, here on two CPU backends) stream too: each layer's sum over the towers.
TEST(Trainer, TowersTellTheSyncOfEveryParameterOnceBeforeItsPush) {
  TinyTraining s;
  std::unique_ptr<nn::Backend> b0 = nn::MakeCpuBackend(1), b1 = nn::MakeCpuBackend(1);
  nn::ModelSpec spec{.name = "tiny", .input_shape = {16}, .num_classes = 4, .layers = {}};
  spec.layers.push_back(nn::DenseSpec{.units = 8});
  spec.layers.push_back(nn::DenseSpec{.units = 4});
  absl::StatusOr<std::unique_ptr<nn::Towers>> towers =
      nn::Towers::Create(spec, {b0.get(), b1.get()}, 8);
  ASSERT_TRUE(towers.ok()) << towers.status();
  RecordingTrainerSync sync;
  TrainerOptions options;
  options.train_steps = 3;
  options.log_every_steps = 0;
  {
    Trainer trainer(**towers, sync, *s.input, options, nullptr);
    ASSERT_TRUE(trainer.Run().ok());
  }
  const size_t handles = (*towers)->params().descs().size();
  ASSERT_EQ(sync.pushes.size(), 3u);
  for (const auto& push : sync.pushes) {
    EXPECT_EQ(push.ready, std::vector<int>(handles, 1));
    EXPECT_EQ(push.told_examples, std::vector<int64_t>(2, 8));  // two layers, the whole batch
    EXPECT_EQ(push.examples, 8);
  }
}

// SIGTERM (worker/stop_request.h) during step 2: the step completes, its push goes, the worker
// leaves, and nothing more is pulled or pushed.
TEST(Trainer, AStopRequestEndsTrainingAfterTheStepInProgressAndLeaves) {
  TinyTraining s;
  RecordingTrainerSync sync;
  sync.stop_at_push = 2;
  TrainerOptions options;
  options.train_steps = 5;
  options.log_every_steps = 0;
  options.stop = &sync.stop;
  absl::StatusOr<TrainResult> r;
  {
    Trainer trainer(*s.model, sync, *s.input, options, nullptr);
    r = trainer.Run();
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(sync.stoppable_when_asked);
  EXPECT_FALSE(sync.stop.Request());  // the loop is over: a request now ends the process
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(r->steps, 2);
  EXPECT_EQ(sync.pushes.size(), 2u);
  EXPECT_EQ(sync.pulls, 2);
  EXPECT_TRUE(sync.left);
  EXPECT_EQ(sync.pulls_after_leave, 0);

  // Not stopped: every step, then the final pull after leaving.
  RecordingTrainerSync whole;
  options.stop = &whole.stop;
  {
    Trainer trainer(*s.model, whole, *s.input, options, nullptr);
    r = trainer.Run();
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->stopped);
  EXPECT_EQ(whole.pushes.size(), 5u);
  EXPECT_EQ(whole.pulls_after_leave, 1);
}

// --train_seconds=0.1 with pushes of 20 ms: no step starts after 0.1 s, so 1 to 5 of the million
// steps run (1 on a machine too busy to run the first in time), and the run ends as a whole one
// does: it leaves, then pulls once.
TEST(Trainer, ATimeBudgetEndsTrainingAsItsLastStepWould) {
  TinyTraining s;
  RecordingTrainerSync sync;
  sync.push_takes = std::chrono::milliseconds(20);
  TrainerOptions options;
  options.train_steps = 1'000'000;
  options.train_seconds = 0.1;
  options.log_every_steps = 0;
  options.stop = &sync.stop;
  prometheus::Registry registry;
  WorkerMetrics metrics(registry, {});
  absl::StatusOr<TrainResult> r;
  {
    Trainer trainer(*s.model, sync, *s.input, options, &metrics);
    r = trainer.Run();
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->out_of_time);
  // What psflow run's progress bar counts against: the steps done, not the million.
  EXPECT_EQ(metrics.train_steps.Value(), static_cast<double>(r->steps));
  EXPECT_FALSE(r->stopped);
  EXPECT_GE(r->steps, 1);
  EXPECT_LE(r->steps, 5);
  EXPECT_GE(r->seconds, 0.1);
  EXPECT_EQ(sync.pushes.size(), static_cast<size_t>(r->steps));
  EXPECT_TRUE(sync.left);
  EXPECT_EQ(sync.pulls_after_leave, 1);
}

TEST(Trainer, AClippedStepTellsTheSyncNothingEarly) {
  TinyTraining s;
  RecordingTrainerSync sync;
  TrainerOptions options;
  options.train_steps = 2;
  options.log_every_steps = 0;
  options.max_grad_norm = 0.01f;
  {
    Trainer trainer(*s.model, sync, *s.input, options, nullptr);
    ASSERT_TRUE(trainer.Run().ok());
  }
  ASSERT_EQ(sync.pushes.size(), 2u);
  for (const auto& push : sync.pushes) EXPECT_TRUE(push.told_examples.empty());
}

TEST(Trainer, WithoutStreamingTellsTheSyncNothingEarly) {
  TinyTraining s;
  RecordingTrainerSync sync;
  TrainerOptions options;
  options.train_steps = 2;
  options.log_every_steps = 0;
  options.stream_gradients = false;
  {
    Trainer trainer(*s.model, sync, *s.input, options, nullptr);
    ASSERT_TRUE(trainer.Run().ok());
  }
  ASSERT_EQ(sync.pushes.size(), 2u);
  for (const auto& push : sync.pushes) {
    EXPECT_TRUE(push.told_examples.empty());
    EXPECT_EQ(push.examples, 8);
  }
}

// Parameters gone NaN (a diverged model) make every loss NaN: with nothing measuring the
// gradients (they stream), the steps are pushed, and max_skipped_in_a_row of them in a row fail
// the run, saying so, rather than training on to export NaN.
TEST(Trainer, ALossNotFiniteInEveryStepFailsTheRun) {
  TinyTraining s;
  RecordingTrainerSync sync;
  sync.pull_nan = true;
  TrainerOptions options;
  options.train_steps = 10;
  options.log_every_steps = 0;
  options.max_skipped_in_a_row = 3;
  absl::StatusOr<TrainResult> r;
  {
    Trainer trainer(*s.model, sync, *s.input, options, nullptr);
    r = trainer.Run();
  }
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("the loss was not finite in 3 steps in a row"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(sync.pushes.size(), 2u);
}

// The chief that exports waits, after leaving, until no other worker trains, then pulls the
// final model; past await_others it pulls what there is.
TEST(Trainer, AwaitingOthersAsksUntilNoneTrainsThenPulls) {
  TinyTraining s;
  RecordingTrainerSync sync;
  sync.others = {1, 0};
  TrainerOptions options;
  options.train_steps = 2;
  options.log_every_steps = 0;
  options.await_others = std::chrono::seconds(60);
  {
    Trainer trainer(*s.model, sync, *s.input, options, nullptr);
    ASSERT_TRUE(trainer.Run().ok());
  }
  EXPECT_EQ(sync.others_asked, 2u);
  EXPECT_EQ(sync.pulls_after_leave, 1);

  RecordingTrainerSync forever;
  forever.others = {2};
  options.await_others = std::chrono::milliseconds(50);
  {
    Trainer trainer(*s.model, forever, *s.input, options, nullptr);
    ASSERT_TRUE(trainer.Run().ok());
  }
  EXPECT_GE(forever.others_asked, 2u);
  EXPECT_EQ(forever.pulls_after_leave, 1);

  // Workers counted but no update for await_progress: they are gone; no waiting for the rest.
  RecordingTrainerSync gone;
  gone.others = {1};
  gone.moving_step = false;
  options.await_others = std::chrono::seconds(600);
  options.await_progress = std::chrono::milliseconds(50);
  {
    Trainer trainer(*s.model, gone, *s.input, options, nullptr);
    ASSERT_TRUE(trainer.Run().ok());
  }
  EXPECT_EQ(gone.others_asked, 2u);  // the first sees step 7, the second sees it still
  EXPECT_EQ(gone.pulls_after_leave, 1);
}

}  // namespace
}  // namespace psflow
