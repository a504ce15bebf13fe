#include "ps/step_rules.h"

#include "absl/strings/str_cat.h"
#include "ps/worker_membership.h"

namespace psflow::step_rules {

absl::Status CheckPushHeader(const proto::TransferHeader& header, int64_t step) {
  if (header.step() > step) {
    return absl::InvalidArgumentError(absl::StrCat("gradients computed at step ", header.step(),
                                                   ", a step from the future (the ps is at ", step,
                                                   ")"));
  }
  if (header.worker() < 0 || header.worker() >= kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push from worker ", header.worker(), "; worker indexes go from 0 to ", kMaxWorkers - 1));
  }
  if (header.num_chunks() == 0 || header.num_chunks() > kMaxChunks ||
      header.chunk() >= header.num_chunks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("push chunk ", header.chunk(), " of ", header.num_chunks()));
  }
  return absl::OkStatus();
}

}  // namespace psflow::step_rules
