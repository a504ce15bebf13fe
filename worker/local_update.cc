#include "core/status_macros.h"
#include "ps/optimizer.h"
#include "worker/parameter_sync.h"

namespace psflow {

absl::StatusOr<std::unique_ptr<LocalUpdate>> LocalUpdate::Create(const TrainingConfig& config) {
  ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(config.optimizer));
  return std::unique_ptr<LocalUpdate>(new LocalUpdate(std::move(optimizer)));
}

LocalUpdate::LocalUpdate(std::unique_ptr<Optimizer> optimizer)
    : optimizer_(std::move(optimizer)), learning_rate_(optimizer_->config().learning_rate()) {}

LocalUpdate::~LocalUpdate() = default;

absl::Status LocalUpdate::Prepare(const nn::ParameterSet& params, bool) {
  slots_.clear();
  for (int s = 0; s < optimizer_->num_slots(); ++s) {
    slots_.emplace_back(static_cast<size_t>(params.total_size()),
                        optimizer_->slot_initial_value(s));
  }
  return absl::OkStatus();
}

absl::StatusOr<SyncResult> LocalUpdate::Pull(nn::ParameterSet&) {
  return SyncResult{.global_step = global_step_};
}

absl::StatusOr<SyncResult> LocalUpdate::Push(nn::ParameterSet& params, int64_t) {
  std::vector<std::span<float>> slots(slots_.begin(), slots_.end());
  optimizer_->Apply(learning_rate_, global_step_ + 1, params.values(), params.grads(), slots);
  return SyncResult{.global_step = ++global_step_};
}

absl::Status LocalUpdate::SetLearningRate(float learning_rate) {
  learning_rate_ = learning_rate;
  return absl::OkStatus();
}

}  // namespace psflow
