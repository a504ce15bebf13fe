#include "core/same_training.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

std::string Describe(const proto::OptimizerConfig& optimizer, const proto::SyncConfig& sync) {
  return absl::StrCat("optimizer ", optimizer.name(), ", ", sync.sync_replicas() ? "sync" : "async",
                      " steps");
}

}  // namespace

absl::Status CheckSameTraining(const proto::OptimizerConfig& held_optimizer,
                               const proto::SyncConfig& held_sync,
                               const proto::OptimizerConfig& asked_optimizer,
                               const proto::SyncConfig& asked_sync) {
  const bool same_optimizer =
      held_optimizer.name().empty() || held_optimizer.name() == asked_optimizer.name();
  if (same_optimizer && held_sync.sync_replicas() == asked_sync.sync_replicas()) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the ps task's variables train with ", Describe(held_optimizer, held_sync),
      "; this worker asks for ", Describe(asked_optimizer, asked_sync),
      ": every worker must give the same --optimizer and --sync_replicas, and a ps task "
      "restored from its checkpoint keeps what it was created with (an empty --checkpoint_dir "
      "starts afresh)"));
}

}  // namespace psflow
