#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "worker/step_recorder.h"
#include "worker/time_budget.h"

namespace psflow {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Trainer::Trainer(nn::Trainable& model, ParameterSync& sync, data::Prefetcher& input,
                 TrainerOptions options, WorkerMetrics* metrics)
    : model_(model),
      sync_(sync),
      forwarder_(sync, model.params()),
      input_(input),
      options_(options),
      metrics_(metrics),
      learning_rate_(options.learning_rate),
      scaler_(options.loss_scale) {
  if (options_.stream_gradients) model_.SetGradientListener(&forwarder_);
}

Trainer::~Trainer() { model_.SetGradientListener(nullptr); }

absl::StatusOr<TrainResult> Trainer::Run() {
  const int64_t per_epoch = input_.batches_per_epoch();
  const int64_t total_steps =
      options_.train_steps > 0 ? options_.train_steps : options_.train_epochs * per_epoch;
  PSFLOW_LOG(INFO) << total_steps << " steps, " << per_epoch << " per epoch";
  if (options_.sparse_pulls && sync_.pull_ahead() > input_.depth()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sparse pulls ", sync_.pull_ahead(),
                     " steps ahead need an input prefetched as far (", input_.depth(), ")"));
  }
  nn::ParameterSet& params = model_.params();
  if (options_.is_chief) params.Initialize(options_.seed);
  RETURN_IF_ERROR(sync_.Prepare(params, options_.is_chief));
  // From here: the first progress line's rate counts training steps only.
  StepRecorder recorder(metrics_, total_steps, model_.labels_per_example(),
                        options_.log_every_steps);

  const double input_wait_before = input_.wait_seconds();
  const Clock::time_point start = Clock::now();
  bool stopped = false;
  std::optional<StopRequest::StoppableScope> stoppable;
  if (options_.stop != nullptr) stoppable.emplace(*options_.stop);
  bool out_of_time = false;
  for (int64_t step = 0; step < total_steps; ++step) {
    if (options_.train_seconds > 0) {
      const double elapsed = Seconds(Clock::now() - start);
      if (elapsed >= options_.train_seconds) {
        PSFLOW_LOG(INFO) << "trained for " << options_.train_seconds
                         << " s (--train_seconds): " << step << " of " << total_steps << " steps";
        recorder.ExpectSteps(step);
        out_of_time = true;
        break;
      }
      recorder.ExpectSteps(StepsWithinBudget(total_steps, step, elapsed, options_.train_seconds));
    }
    if (options_.stop != nullptr && options_.stop->requested()) {
      PSFLOW_LOG(WARNING) << "stopped after " << step << " of " << total_steps
                          << " steps: leaving the job";
      stopped = true;
      break;
    }
    if (step % per_epoch == 0) {
      RETURN_IF_ERROR(StartEpoch(static_cast<int>(step / per_epoch), recorder));
    }
    RETURN_IF_ERROR(Step(recorder));
  }
  // The last exchange in flight: its gradients still count. Stopping, the worker leaves even if
  // that fails (a ps task lost while stopping is not waited for).
  const absl::StatusOr<std::optional<SyncResult>> last = sync_.Flush(params);
  if (!last.ok()) {
    if (stopped) sync_.Leave().IgnoreError();
    return last.status();
  }
  if (last->has_value()) recorder.Pushed(**last);
  TrainResult& result = recorder.Finish();
  result.seconds = Seconds(Clock::now() - start);
  result.out_of_time = out_of_time;
  result.loss_scale = scaler_.scale();
  result.input_wait_seconds = input_.wait_seconds() - input_wait_before;
  // Sync mode stops waiting for this worker; its last push still counts.
  RETURN_IF_ERROR(sync_.Leave());
  stoppable.reset();
  result.stopped = stopped;
  if (stopped) return result;
  if (options_.await_others > std::chrono::milliseconds::zero()) RETURN_IF_ERROR(AwaitOthers());
  // Evaluate what the ps holds now, not this worker's last pulled copy: every row.
  params.set_pulls_rows(false);
  ASSIGN_OR_RETURN(const SyncResult pulled, sync_.Pull(params));
  if (metrics_ != nullptr) metrics_->pulled_bytes.Increment(static_cast<double>(pulled.bytes));
  result.global_step = std::max(result.global_step, pulled.global_step);
  return result;
}

absl::Status Trainer::AwaitOthers() {
  const Clock::time_point give_up = Clock::now() + options_.await_others;
  bool said = false;
  int64_t last_step = -1;
  Clock::time_point moved = Clock::now();
  for (;;) {
    const absl::StatusOr<ParameterSync::Others> asked = sync_.OthersTraining();
    if (!asked.ok()) {  // a ps task lost: the final pull waits for it (and fails if it must)
      PSFLOW_LOG(WARNING) << asked.status().message()
                          << ": not waiting for other workers; taking the model as the ps tasks "
                             "hold it";
      return absl::OkStatus();
    }
    const ParameterSync::Others& others = *asked;
    if (others.training == 0) return absl::OkStatus();
    const Clock::time_point now = Clock::now();
    if (others.global_step != last_step) {
      last_step = others.global_step;
      moved = now;
    }
    const bool stalled = now - moved >= options_.await_progress;
    if (now >= give_up || stalled) {
      PSFLOW_LOG(WARNING) << others.training << " other worker(s) still counted after "
                          << (stalled ? Seconds(now - moved) : Seconds(options_.await_others))
                          << (stalled ? " s without an update (gone without leaving?)" : " s")
                          << ": taking the model as the ps tasks hold it at global step "
                          << others.global_step;
      return absl::OkStatus();
    }
    if (!std::exchange(said, true)) {
      PSFLOW_LOG(INFO) << "waiting for " << others.training
                       << " other worker(s) to finish, so that the final model has their updates";
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(
        {std::chrono::seconds(1), give_up - now, moved + options_.await_progress - now}));
  }
}

absl::Status Trainer::StartEpoch(int epoch, StepRecorder& recorder) {
  recorder.StartEpoch(epoch);
  // The learning rate goes to the ps from this thread: nothing may be in flight.
  ASSIGN_OR_RETURN(const std::optional<SyncResult> flushed, sync_.Flush(model_.params()));
  if (flushed.has_value()) recorder.Pushed(*flushed);
  model_.ResetState();
  if (!options_.is_chief) return absl::OkStatus();
  const float rate = options_.schedule.At(options_.learning_rate, epoch);
  if (rate == learning_rate_) return absl::OkStatus();
  RETURN_IF_ERROR(sync_.SetLearningRate(rate));
  PSFLOW_LOG(INFO) << absl::StrFormat("epoch %d: learning rate %g", epoch + 1, rate);
  learning_rate_ = rate;
  return absl::OkStatus();
}

absl::Status Trainer::Step(StepRecorder& recorder) {
  nn::ParameterSet& params = model_.params();
  StepTimes t;
  const int ahead = options_.sparse_pulls ? sync_.pull_ahead() : -1;
  const Clock::time_point start = Clock::now();
  double waited_before = input_.wait_seconds();
  const nn::Batch batch = input_.Next();
  t.input = input_.wait_seconds() - waited_before;
  // Sparse pulls: this step's rows, for the pull that serves it.
  if (ahead == 0) RETURN_IF_ERROR(model_.ListRowsRead(batch, params));
  ASSIGN_OR_RETURN(const SyncResult pulled, sync_.Pull(params));
  recorder.Pulled(pulled);
  const Clock::time_point ready = Clock::now();  // parameters pulled and the batch at hand
  t.pull = Seconds(ready - start) - t.input;
  const float loss_scale = scaler_.scale();
  ASSIGN_OR_RETURN(const Computed step, ComputeGradients(batch, recorder));
  const Clock::time_point computed = Clock::now();
  t.compute = Seconds(computed - ready);
  if (step.finite) {
    // Sparse pulls: the rows of the step whose values this push starts pulling.
    waited_before = input_.wait_seconds();
    if (ahead > 0) RETURN_IF_ERROR(model_.ListRowsRead(input_.Peek(ahead - 1), params));
    const double peeked = input_.wait_seconds() - waited_before;
    t.input += peeked;
    ASSIGN_OR_RETURN(const SyncResult pushed, sync_.Push(params, batch.size));
    recorder.Pushed(pushed);
    t.pull += pushed.waited_seconds;  // overlapped: waiting for the exchange is pulling
    t.push = Seconds(Clock::now() - computed) - pushed.waited_seconds - peeked;
  } else if (ahead > 0) {
    // Sparse pulls ahead: the exchange in flight brings the next step's rows, and no Push takes
    // them now; a Flush does (the next Pull then brings every row).
    ASSIGN_OR_RETURN(const std::optional<SyncResult> flushed, sync_.Flush(params));
    if (flushed.has_value()) recorder.Pushed(*flushed);
  }
  recorder.Step(t, batch.size, step.loss, step.finite, loss_scale);
  return absl::OkStatus();
}

absl::StatusOr<Trainer::Computed> Trainer::ComputeGradients(const nn::Batch& batch,
                                                            StepRecorder& recorder) {
  const float loss_scale = scaler_.scale();
  if (options_.loss_scale.mode != nn::LossScaleOptions::Mode::kNone) {
    model_.SetLossScale(loss_scale);
  }
  Computed c;
  forwarder_.set_examples(batch.size);
  ASSIGN_OR_RETURN(c.loss, model_.ComputeGradients(batch, options_.max_grad_norm));
  c.finite = scaler_.Update(model_.last_step_finite());
  non_finite_losses_in_a_row_ = std::isfinite(c.loss) ? 0 : non_finite_losses_in_a_row_ + 1;
  if (non_finite_losses_in_a_row_ >= options_.max_skipped_in_a_row) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the loss was not finite in %d steps in a row (%g): the model diverged; lower the "
        "learning rate or set --max_grad_norm",
        non_finite_losses_in_a_row_, c.loss));
  }
  if (c.finite) return c;
  // Not pushed: the parameters stay as they are, the next step computes with them again.
  recorder.Skipped();
  PSFLOW_LOG(WARNING) << absl::StrFormat(
      "step %d: gradients not finite (loss scale %g): skipped; next loss scale %g",
      recorder.steps() + 1, loss_scale, scaler_.scale());
  if (scaler_.consecutive_skipped() >= options_.max_skipped_in_a_row) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "gradients were not finite in %d steps in a row (loss %g): the model diverged; lower the "
        "learning rate or set --max_grad_norm",
        scaler_.consecutive_skipped(), c.loss));
  }
  return c;
}

}  // namespace psflow
