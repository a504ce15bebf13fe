#include "core/optimizer.h"
#include "core/status_macros.h"
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
  slot_spans_.assign(slots_.begin(), slots_.end());
  run_slots_.assign(slots_.size(), {});
  return absl::OkStatus();
}

absl::StatusOr<SyncResult> LocalUpdate::Pull(nn::ParameterSet&) {
  return SyncResult{.global_step = global_step_};
}

absl::StatusOr<SyncResult> LocalUpdate::Push(nn::ParameterSet& params, int64_t) {
  // As the ps does: dense parameters whole, sparse ones (embeddings) only in their touched rows,
  // so optimizers with state (momentum, Adam) leave untouched rows alone.
  const int64_t step = global_step_ + 1;
  auto apply = [&](int64_t offset, int64_t size) {
    const auto at = static_cast<size_t>(offset), n = static_cast<size_t>(size);
    for (size_t k = 0; k < slot_spans_.size(); ++k) run_slots_[k] = slot_spans_[k].subspan(at, n);
    optimizer_->Apply(learning_rate_, step, params.values().subspan(at, n),
                      params.grads().subspan(at, n), run_slots_);
  };
  for (const nn::ParameterDesc& d : params.descs()) {
    if (!d.sparse) {
      apply(d.offset, d.size);
      continue;
    }
    const int64_t width = d.shape.empty() || d.shape[0] == 0 ? 0 : d.size / d.shape[0];
    for (int64_t row : d.touched_rows) apply(d.offset + row * width, width);
  }
  params.ValuesChanged();
  return SyncResult{.global_step = ++global_step_};
}

absl::Status LocalUpdate::SetLearningRate(float learning_rate) {
  learning_rate_ = learning_rate;
  return absl::OkStatus();
}

}  // namespace psflow
