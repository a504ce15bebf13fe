#include "core/optimizer.h"
#include "core/status_macros.h"
#include "worker/parameter_sync.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<LocalUpdate>> LocalUpdate::Create(const TrainingConfig& config,
                                                                 nn::Model* model) {
  ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(config.optimizer));
  return std::unique_ptr<LocalUpdate>(new LocalUpdate(std::move(optimizer), model));
}

LocalUpdate::LocalUpdate(std::unique_ptr<Optimizer> optimizer, nn::Model* model)
    : optimizer_(std::move(optimizer)),
      model_(model),
      learning_rate_(optimizer_->config().learning_rate()) {}

LocalUpdate::~LocalUpdate() {
  if (model_ != nullptr) model_->SetGradientsOnDevice(false);
}

absl::Status LocalUpdate::Prepare(const nn::ParameterSet& params, bool) {
  if (model_ == nullptr) {
    update_ = nn::MakeHostUpdate(*optimizer_, params);
    return absl::OkStatus();
  }
  if (&params != &model_->params()) {
    return absl::InvalidArgumentError(
        "LocalUpdate: Prepare with a parameter set other than its model's");
  }
  ASSIGN_OR_RETURN(update_, model_->backend().MakeUpdate(*optimizer_, model_->params()));
  model_->SetGradientsOnDevice(update_->on_device());
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

absl::StatusOr<std::optional<SyncResult>> LocalUpdate::Flush(nn::ParameterSet& params) {
  if (!device_ahead_) return std::nullopt;
  RETURN_IF_ERROR(model_->backend().DownloadParameters(params));
  device_ahead_ = false;
  return std::nullopt;
}

absl::Status LocalUpdate::SetLearningRate(float learning_rate) {
  learning_rate_ = learning_rate;
  return absl::OkStatus();
}

}  // namespace psflow
