#include "worker/trainer.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "worker/clip.h"

namespace psflow {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Trainer::Trainer(nn::Model& model, ParameterSync& sync, const data::Dataset& train,
                 const data::Dataset& test, TrainerOptions options, WorkerMetrics* metrics)
    : model_(model),
      sync_(sync),
      train_(train),
      test_(test),
      options_(options),
      metrics_(metrics) {}

absl::StatusOr<TrainResult> Trainer::Run() {
  const data::Range shard =
      data::ShardRange(train_.size(), options_.shard_index, options_.num_shards);
  if (shard.size() < options_.batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", options_.shard_index, " has ", shard.size(),
                     " examples, fewer than one batch of ", options_.batch_size));
  }
  data::BatchSampler sampler(train_, shard, options_.batch_size,
                             options_.seed * 7919 + static_cast<uint64_t>(options_.shard_index));
  const int64_t total_steps = options_.train_steps > 0
                                  ? options_.train_steps
                                  : options_.train_epochs * sampler.batches_per_epoch();
  PSFLOW_LOG(INFO) << "shard " << options_.shard_index << " of " << options_.num_shards << ": ["
                   << shard.begin << ", " << shard.end << "), " << total_steps << " steps of batch "
                   << options_.batch_size;

  nn::ParameterSet& params = model_.params();
  if (options_.is_chief) params.Initialize(options_.seed);
  RETURN_IF_ERROR(sync_.Prepare(params, options_.is_chief));

  TrainResult result;
  const auto start = Clock::now();
  auto window_start = start;
  int64_t window_examples = 0;
  for (int64_t step = 0; step < total_steps; ++step) {
    const auto step_start = Clock::now();
    ASSIGN_OR_RETURN(SyncResult pulled, sync_.Pull(params));
    const auto pulled_at = Clock::now();
    const nn::Batch batch = sampler.Next();
    result.last_loss = model_.ComputeGradients(batch);
    if (options_.max_grad_norm > 0) ClipByGlobalNorm(params, options_.max_grad_norm);
    const auto computed_at = Clock::now();
    ASSIGN_OR_RETURN(SyncResult pushed, sync_.Push(params, batch.size));
    if (pushed.dropped) ++result.dropped_pushes;
    result.pull_seconds += Seconds(pulled_at - step_start);
    result.compute_seconds += Seconds(computed_at - pulled_at);
    result.push_seconds += Seconds(Clock::now() - computed_at);
    result.global_step = pushed.global_step;
    result.examples += batch.size;
    window_examples += batch.size;
    ++result.steps;
    if (metrics_ != nullptr) {
      metrics_->examples.Increment(static_cast<double>(batch.size));
      metrics_->steps.Increment();
      metrics_->step_time.Observe(Seconds(Clock::now() - step_start));
      metrics_->loss.Set(result.last_loss);
      metrics_->pulled_bytes.Increment(static_cast<double>(pulled.bytes));
      metrics_->pushed_bytes.Increment(static_cast<double>(pushed.bytes));
      metrics_->global_step.Set(static_cast<double>(pushed.global_step));
    }
    if (options_.log_every_steps > 0 &&
        (result.steps % options_.log_every_steps == 0 || result.steps == total_steps)) {
      const auto now = Clock::now();
      PSFLOW_LOG(INFO) << absl::StrFormat(
          "step %d/%d global_step %d loss %.4f examples/s %.0f", result.steps, total_steps,
          result.global_step, result.last_loss, window_examples / Seconds(now - window_start));
      window_start = now;
      window_examples = 0;
    }
  }
  result.seconds = Seconds(Clock::now() - start);
  // Sync mode stops waiting for this worker; its last push still counts.
  RETURN_IF_ERROR(sync_.Leave());
  RETURN_IF_ERROR(Evaluate(result));
  return result;
}

absl::Status Trainer::Evaluate(TrainResult& result) {
  // Evaluate what the ps holds now, not this worker's last pulled copy.
  ASSIGN_OR_RETURN(SyncResult pulled, sync_.Pull(model_.params()));
  result.global_step = std::max(result.global_step, pulled.global_step);
  double loss_sum = 0;
  int64_t correct = 0;
  data::ForEachBatch(test_, model_.max_batch(), [&](const nn::Batch& batch) {
    const auto e = model_.Evaluate(batch);
    loss_sum += e.loss_sum;
    correct += e.correct;
  });
  result.test_accuracy = test_.size() > 0 ? static_cast<double>(correct) / test_.size() : 0;
  result.test_loss = test_.size() > 0 ? loss_sum / test_.size() : 0;
  if (metrics_ != nullptr) metrics_->test_accuracy.Set(result.test_accuracy);
  return absl::OkStatus();
}

}  // namespace psflow
