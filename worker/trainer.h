// Between-graph training on one worker: every step pulls the parameters, computes gradients on
// the next batch of this worker's input, and pushes them. The chief (worker 0) creates the
// variables from its own seeded initial values first; the others wait for them. At each epoch's
// start stateful layers restart from zeros and the chief applies the learning-rate schedule.
//
// Sparse pulls (TrainerOptions::sparse_pulls): before each pull, the trainer lists in the
// parameters the rows of the sparse parameters that the step the pull serves reads, so the pull
// brings only those (PTB small: its 8 MB embedding becomes the 400 rows of a batch); the final
// pull, which evaluation reads, brings every row.
//
// Overlap within a step: the trainer is the model's GradientListener while it lives, and hands
// each layer's final gradients to ParameterSync::GradientsReady (with the batch's size) as
// backward produces them, so a PsClient starts sending them before the step ends; Push then sends
// the rest. Only steps that need no global look at the gradients stream (Trainable's contract: no
// clipping, no loss scale), so a step whose gradients turn out not finite (measured only with
// clipping or a loss scale) has sent nothing. OverlappedSync ignores GradientsReady.
#ifndef PSFLOW_WORKER_TRAINER_H_
#define PSFLOW_WORKER_TRAINER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/learning_rate_schedule.h"
#include "worker/data/prefetcher.h"
#include "worker/nn/loss_scale.h"
#include "worker/nn/trainable.h"
#include "worker/parameter_sync.h"
#include "worker/stop_request.h"
#include "worker/worker_metrics.h"

namespace psflow {

struct TrainerOptions {
  int64_t train_steps = 0;  // when > 0, overrides train_epochs
  int train_epochs = 1;     // passes over this worker's input
  // > 0: a time budget. No step starts once the loop has run this long (counted from its first
  // step); the loop then ends as if its last step were done, and Run goes on as it does then
  // (a success, TrainResult::out_of_time). 0: none.
  double train_seconds = 0;
  bool is_chief = true;
  uint64_t seed = 1;              // the chief's initial parameters
  int64_t log_every_steps = 100;  // 0: no progress lines
  float max_grad_norm = 0;        // > 0: clip the gradients by global norm before each push
  float learning_rate = 0;        // the initial rate (the ParameterSync was configured with it)
  LearningRateSchedule schedule;
  // Loss scaling (fp16 products). Whatever the mode, a step whose measured gradients are not all
  // finite is not pushed; after max_skipped_in_a_row of them in a row Run fails (the model
  // diverged: lower the learning rate). So does a run of as many steps whose loss is not finite
  // when nothing measures the gradients (they are pushed as backward makes them).
  nn::LossScaleOptions loss_scale;
  int64_t max_skipped_in_a_row = 100;
  // Hand each layer's gradients to the ParameterSync as backward produces them (see above);
  // false: Push sends them all after the step (TensorFlow 1.x's order, for comparisons).
  bool stream_gradients = true;
  // Sparse pulls: a pull brings of each sparse parameter (an embedding) only the rows of the step
  // it serves (Trainable::ListRowsRead on that step's batch, taken from the input ahead of time
  // when the ParameterSync pulls ahead: ParameterSync::pull_ahead); false: every row.
  bool sparse_pulls = true;
  // The training loop is its stoppable part (worker/stop_request.h), and it is checked before
  // each step: once requested (SIGTERM) the loop ends, the push in flight completes and the
  // worker leaves; Run then returns without the final pull (TrainResult::stopped). Null: never.
  StopRequest* stop = nullptr;
  // > 0 (the chief that exports the model): after leaving, wait up to this long for every other
  // worker to leave too (ParameterSync::OthersTraining, asked every second), so the final pull
  // brings the job's last updates, not those made until this worker's end. It stops waiting
  // sooner when the global step has not moved for await_progress (the workers still counted are
  // gone: killed without leaving, or counted again by a ps restored from an older checkpoint).
  // Either way a warning names how many were counted, and the pull takes what is there; so does a
  // ps task that cannot be asked (the pull then recovers it, as after any lost task).
  std::chrono::milliseconds await_others{0};
  std::chrono::milliseconds await_progress{std::chrono::seconds(60)};
};

struct TrainResult {
  int64_t steps = 0;
  int64_t examples = 0;
  int64_t words = 0;   // predictions trained on: examples x time steps (= examples if not a LM)
  double seconds = 0;  // training loop only (not initialisation or evaluation)
  bool out_of_time = false;  // TrainerOptions::train_seconds ended the loop before its last step
  // Where the loop's time went: pulling parameters, computing gradients, pushing gradients, and
  // waiting for input (the background thread falling behind). With overlap, pull is the time the
  // loop waited for the background exchange (the push and pull that computing did not hide) and
  // push the time it took to hand the gradients over.
  double pull_seconds = 0;
  double compute_seconds = 0;
  double push_seconds = 0;
  double input_wait_seconds = 0;
  double exchange_seconds = 0;  // overlap: the background thread's push + pull time
  double last_loss = 0;
  double train_perplexity = 0;  // language models: exp(loss per word) over the last epoch
  int64_t global_step = 0;      // last seen from the ps
  int64_t dropped_pushes = 0;   // pushes the ps did not apply (sync: stale or backup)
  int64_t skipped_steps = 0;    // steps with non-finite gradients, never pushed
  int64_t pulled_bytes = 0;     // tensor bytes pulled by the steps (not the final pull)
  int64_t pushed_bytes = 0;     // and pushed
  float loss_scale = 1;         // at the end
  bool stopped = false;         // TrainerOptions::stop ended training early (no final pull)

  double examples_per_second() const { return seconds > 0 ? examples / seconds : 0; }
  double words_per_second() const { return seconds > 0 ? words / seconds : 0; }
};

class StepRecorder;

class Trainer {
 public:
  // All references must outlive the trainer; metrics may be null.
  Trainer(nn::Trainable& model, ParameterSync& sync, data::Prefetcher& input,
          TrainerOptions options, WorkerMetrics* metrics);
  ~Trainer();  // stops listening to the model
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains, leaves (sync mode stops waiting for this worker), and pulls the final parameters
  // into the model, ready to evaluate. Each step pulls, computes and pushes; the ParameterSync
  // decides what that means (OverlappedSync: in the background, beside the next step). Errors
  // from the ParameterSync as they come.
  absl::StatusOr<TrainResult> Run();

 private:
  // Flushes the sync and sets the epoch's learning rate (the chief).
  absl::Status StartEpoch(int epoch, StepRecorder& recorder);
  absl::Status AwaitOthers();  // TrainerOptions::await_others
  absl::Status Step(StepRecorder& recorder);
  // The batch's gradients and loss, with the loss scale; `finite` false when the gradients were
  // not (not to push). FAILED_PRECONDITION after max_skipped_in_a_row such steps.
  struct Computed {
    double loss = 0;
    bool finite = true;
  };
  absl::StatusOr<Computed> ComputeGradients(const nn::Batch& batch, StepRecorder& recorder);

  // Forwards the model's finished layers to sync_.GradientsReady for the step being computed
  // (an object, not a std::function: a step allocates nothing).
  class GradientForwarder final : public nn::GradientListener {
   public:
    GradientForwarder(ParameterSync& sync, const nn::ParameterSet& params)
        : sync_(sync), params_(params) {}
    void set_examples(int64_t examples) { examples_ = examples; }
    void GradientsReady(nn::ParameterSet::Handle first, nn::ParameterSet::Handle last) override {
      sync_.GradientsReady(params_, first, last, examples_);
    }

   private:
    ParameterSync& sync_;
    const nn::ParameterSet& params_;
    int64_t examples_ = 0;
  };

  nn::Trainable& model_;
  ParameterSync& sync_;
  GradientForwarder forwarder_;
  data::Prefetcher& input_;
  TrainerOptions options_;
  WorkerMetrics* metrics_;
  float learning_rate_ = 0;  // as last set on the ps
  nn::LossScaler scaler_;
  // Steps in a row whose loss was not finite though their gradients were not measured (no
  // clipping or loss scaling: streamed, so pushed anyway); max_skipped_in_a_row of them fail Run.
  int64_t non_finite_losses_in_a_row_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_TRAINER_H_
