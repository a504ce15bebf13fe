#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Trainer::Trainer(nn::Trainable& model, ParameterSync& sync, data::Prefetcher& input,
                 TrainerOptions options, WorkerMetrics* metrics)
    : model_(model),
      sync_(sync),
      input_(input),
      options_(options),
      metrics_(metrics),
      learning_rate_(options.learning_rate),
      scaler_(options.loss_scale) {}

absl::Status Trainer::StartEpoch(int epoch) {
  model_.ResetState();
  if (!options_.is_chief) return absl::OkStatus();
  const float rate = options_.schedule.At(options_.learning_rate, epoch);
  if (rate == learning_rate_) return absl::OkStatus();
  RETURN_IF_ERROR(sync_.SetLearningRate(rate));
  PSFLOW_LOG(INFO) << absl::StrFormat("epoch %d: learning rate %g", epoch + 1, rate);
  learning_rate_ = rate;
  return absl::OkStatus();
}

absl::Status Trainer::FinishExchange(TrainResult& result) {
  if (exchange_ == nullptr || !exchange_->in_flight()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Exchange x, exchange_->Finish(model_.params()));
  model_.UploadParameters();
  if (x.pushed.dropped) ++result.dropped_pushes;
  result.global_step = std::max(x.pushed.global_step, x.pulled.global_step);
  result.exchange_seconds += x.push_seconds + x.pull_seconds;
  if (metrics_ != nullptr) {
    metrics_->pulled_bytes.Increment(static_cast<double>(x.pulled.bytes));
    metrics_->pushed_bytes.Increment(static_cast<double>(x.pushed.bytes));
    metrics_->global_step.Set(static_cast<double>(result.global_step));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Trainer::Run() {
  const int64_t per_epoch = input_.batches_per_epoch();
  const int64_t total_steps =
      options_.train_steps > 0 ? options_.train_steps : options_.train_epochs * per_epoch;
  const int64_t positions = model_.labels_per_example();
  const bool language_model = positions > 1;
  PSFLOW_LOG(INFO) << total_steps << " steps, " << per_epoch << " per epoch"
                   << (options_.overlap ? "; push and pull overlapped with the next step" : "");
  // The total `psflow run` draws its progress bar against.
  if (metrics_ != nullptr) metrics_->train_steps.Set(static_cast<double>(total_steps));

  nn::ParameterSet& params = model_.params();
  if (options_.is_chief) params.Initialize(options_.seed);
  RETURN_IF_ERROR(sync_.Prepare(params, options_.is_chief));
  model_.UploadParameters();
  if (options_.overlap) exchange_ = std::make_unique<BackgroundExchange>(sync_, params);

  TrainResult result;
  const double input_wait_before = input_.wait_seconds();
  const auto start = Clock::now();
  auto window_start = start;
  int64_t window_words = 0;
  double epoch_cost = 0;  // summed loss per example over this epoch's steps
  int64_t epoch_positions = 0;
  for (int64_t step = 0; step < total_steps; ++step) {
    if (step % per_epoch == 0) {
      if (step > 0 && language_model && epoch_positions > 0) {
        result.train_perplexity = std::exp(epoch_cost / static_cast<double>(epoch_positions));
        PSFLOW_LOG(INFO) << absl::StrFormat("epoch %d: train perplexity %.3f", step / per_epoch,
                                            result.train_perplexity);
      }
      epoch_cost = 0;
      epoch_positions = 0;
      // The learning rate goes to the ps from this thread: no exchange may be in flight.
      RETURN_IF_ERROR(FinishExchange(result));
      RETURN_IF_ERROR(StartEpoch(static_cast<int>(step / per_epoch)));
    }
    const auto step_start = Clock::now();
    // Overlapped, the parameters come from the exchange started after the previous step; only
    // the first step pulls here.
    if (exchange_ == nullptr || step == 0) {
      ASSIGN_OR_RETURN(SyncResult pulled, sync_.Pull(params));
      model_.UploadParameters();
      result.global_step = pulled.global_step;
      if (metrics_ != nullptr) metrics_->pulled_bytes.Increment(static_cast<double>(pulled.bytes));
    }
    const double waited_before = input_.wait_seconds();
    const nn::Batch batch = input_.Next();
    const double input_wait = input_.wait_seconds() - waited_before;
    const auto ready_at = Clock::now();  // parameters pulled and the batch at hand
    const float loss_scale = scaler_.scale();
    if (options_.loss_scale.mode != nn::LossScaleOptions::Mode::kNone) {
      model_.SetLossScale(loss_scale);
    }
    ASSIGN_OR_RETURN(result.last_loss, model_.ComputeGradients(batch, options_.max_grad_norm));
    const auto computed_at = Clock::now();
    double pull_seconds = Seconds(ready_at - step_start) - input_wait;
    const bool applied = scaler_.Update(model_.last_step_finite());
    if (!applied) {
      // Not pushed: the parameters stay as they are, the next step computes with them again.
      ++result.skipped_steps;
      if (metrics_ != nullptr) metrics_->skipped_steps.Increment();
      PSFLOW_LOG(WARNING) << absl::StrFormat(
          "step %d: gradients not finite (loss scale %g): skipped; next loss scale %g",
          result.steps + 1, loss_scale, scaler_.scale());
      if (scaler_.consecutive_skipped() >= options_.max_skipped_in_a_row) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "gradients were not finite in %d steps in a row (loss %g): the model diverged; lower "
            "the learning rate or set --max_grad_norm",
            scaler_.consecutive_skipped(), result.last_loss));
      }
    } else if (exchange_ != nullptr) {
      RETURN_IF_ERROR(FinishExchange(result));
      const auto taken_at = Clock::now();
      pull_seconds += Seconds(taken_at - computed_at);
      exchange_->Start(params, batch.size);
      const double handover = Seconds(Clock::now() - taken_at);
      result.push_seconds += handover;
      if (metrics_ != nullptr) metrics_->push_seconds.Increment(handover);
    } else {
      ASSIGN_OR_RETURN(SyncResult pushed, sync_.Push(params, batch.size));
      if (pushed.dropped) ++result.dropped_pushes;
      result.global_step = pushed.global_step;
      const double push_seconds = Seconds(Clock::now() - computed_at);
      result.push_seconds += push_seconds;
      if (metrics_ != nullptr) {
        metrics_->pushed_bytes.Increment(static_cast<double>(pushed.bytes));
        metrics_->global_step.Set(static_cast<double>(pushed.global_step));
        metrics_->push_seconds.Increment(push_seconds);
      }
    }
    result.pull_seconds += pull_seconds;
    result.compute_seconds += Seconds(computed_at - ready_at);
    result.examples += batch.size;
    result.words += batch.size * positions;
    window_words += batch.size * positions;
    if (applied) {  // a skipped step's loss may be infinite too
      epoch_cost += result.last_loss;
      epoch_positions += positions;
    }
    ++result.steps;
    if (metrics_ != nullptr) {
      metrics_->examples.Increment(static_cast<double>(batch.size));
      if (language_model) metrics_->words.Increment(static_cast<double>(batch.size * positions));
      metrics_->steps.Increment();
      metrics_->step_time.Observe(Seconds(Clock::now() - step_start));
      metrics_->loss.Set(result.last_loss);
      metrics_->loss_scale.Set(scaler_.scale());
      metrics_->pull_seconds.Increment(pull_seconds);
      metrics_->input_wait_seconds.Increment(input_wait);
      metrics_->compute_seconds.Increment(Seconds(computed_at - ready_at));
    }
    if (options_.log_every_steps > 0 &&
        (result.steps % options_.log_every_steps == 0 || result.steps == total_steps)) {
      const auto now = Clock::now();
      const double rate = window_words / Seconds(now - window_start);
      if (language_model) {
        // The seed's progress line: perplexity so far this epoch and words per second.
        PSFLOW_LOG(INFO) << absl::StrFormat(
            "step %d/%d global_step %d perplexity %.3f speed: %.0f wps", result.steps, total_steps,
            result.global_step, std::exp(epoch_cost / static_cast<double>(epoch_positions)), rate);
      } else {
        PSFLOW_LOG(INFO) << absl::StrFormat("step %d/%d global_step %d loss %.4f examples/s %.0f",
                                            result.steps, total_steps, result.global_step,
                                            result.last_loss, rate);
      }
      window_start = now;
      window_words = 0;
    }
  }
  // The last step's gradients still count.
  RETURN_IF_ERROR(FinishExchange(result));
  exchange_.reset();
  result.seconds = Seconds(Clock::now() - start);
  result.loss_scale = scaler_.scale();
  result.input_wait_seconds = input_.wait_seconds() - input_wait_before;
  if (language_model && epoch_positions > 0) {
    result.train_perplexity = std::exp(epoch_cost / static_cast<double>(epoch_positions));
  }
  // Sync mode stops waiting for this worker; its last push still counts.
  RETURN_IF_ERROR(sync_.Leave());
  // Evaluate what the ps holds now, not this worker's last pulled copy.
  ASSIGN_OR_RETURN(SyncResult pulled, sync_.Pull(params));
  model_.UploadParameters();
  result.global_step = std::max(result.global_step, pulled.global_step);
  return result;
}

}  // namespace psflow
