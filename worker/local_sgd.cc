#include "core/sgd.h"
#include "worker/parameter_sync.h"

namespace psflow {

absl::Status LocalSgd::Prepare(const nn::ParameterSet&, bool, float learning_rate) {
  learning_rate_ = learning_rate;
  return absl::OkStatus();
}

absl::StatusOr<SyncResult> LocalSgd::Pull(nn::ParameterSet&) { return SyncResult{global_step_, 0}; }

absl::StatusOr<SyncResult> LocalSgd::Push(nn::ParameterSet& params, int64_t, int64_t) {
  SgdUpdate(learning_rate_, params.grads(), params.values());
  return SyncResult{++global_step_, 0};
}

}  // namespace psflow
