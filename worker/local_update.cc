#include "absl/strings/str_cat.h"
#include "core/optimizer.h"
#include "core/status_macros.h"
#include "worker/parameter_sync.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<LocalUpdate>> LocalUpdate::Create(const TrainingConfig& config,
                                                                 nn::Trainable* trainable) {
  ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(config.optimizer));
  return std::unique_ptr<LocalUpdate>(new LocalUpdate(std::move(optimizer), trainable));
}

LocalUpdate::LocalUpdate(std::unique_ptr<Optimizer> optimizer, nn::Trainable* trainable)
    : optimizer_(std::move(optimizer)),
      trainable_(trainable),
      learning_rate_(optimizer_->config().learning_rate()) {}

LocalUpdate::~LocalUpdate() = default;

absl::Status LocalUpdate::Prepare(const nn::ParameterSet& params, bool) {
  if (trainable_ == nullptr) {
    update_ = nn::MakeHostUpdate(*optimizer_, params);
    return absl::OkStatus();
  }
  if (&params != &trainable_->params()) {
    return absl::InvalidArgumentError(
        "LocalUpdate: Prepare with a parameter set other than its model's");
  }
  update_.reset();  // a second Prepare: the first update's end comes before the next's start
  absl::StatusOr<std::unique_ptr<nn::ParameterUpdate>> update = trainable_->MakeUpdate(*optimizer_);
  if (absl::IsResourceExhausted(update.status())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        update.status().message(),
        " (psflow-worker --update_on_device=false keeps the optimizer in host memory)"));
  }
  if (!update.ok()) return update.status();
  update_ = *std::move(update);
  return absl::OkStatus();
}

absl::StatusOr<SyncResult> LocalUpdate::Pull(nn::ParameterSet&) {
  return SyncResult{.global_step = global_step_};
}

absl::StatusOr<SyncResult> LocalUpdate::Push(nn::ParameterSet& params, int64_t) {
  if (update_ == nullptr) return absl::FailedPreconditionError("LocalUpdate: Push before Prepare");
  update_->Apply(params, learning_rate_, global_step_ + 1);
  device_ahead_ = update_->on_device();
  return SyncResult{.global_step = ++global_step_};
}

absl::StatusOr<std::optional<SyncResult>> LocalUpdate::Flush(nn::ParameterSet&) {
  if (!device_ahead_) return std::nullopt;
  RETURN_IF_ERROR(trainable_->DownloadParameters());
  device_ahead_ = false;
  return std::nullopt;
}

absl::Status LocalUpdate::SetLearningRate(float learning_rate) {
  learning_rate_ = learning_rate;
  return absl::OkStatus();
}

}  // namespace psflow
