#include "ps/step_rules.h"

#include "absl/strings/str_cat.h"

namespace psflow::step_rules {

absl::Status CheckPushHeader(const proto::TransferHeader& header, int64_t step, int total_workers) {
  if (header.step() > step) {
    return absl::InvalidArgumentError(absl::StrCat("gradients computed at step ", header.step(),
                                                   ", a step from the future (the ps is at ", step,
                                                   ")"));
  }
  if (header.worker() < 0 || header.worker() >= total_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("push from worker ", header.worker(), "; the job has ", total_workers));
  }
  if (header.num_chunks() == 0 || header.num_chunks() > kMaxChunks ||
      header.chunk() >= header.num_chunks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("push chunk ", header.chunk(), " of ", header.num_chunks()));
  }
  return absl::OkStatus();
}

}  // namespace psflow::step_rules
