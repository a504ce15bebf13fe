#include "core/optimizer_settings.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psflow {

absl::Status CheckOptimizerSettings(absl::string_view name, float learning_rate, float momentum) {
  if (name != "sgd" && name != "momentum" && name != "adagrad" && name != "adam" &&
      name != "rmsprop") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown optimizer name \"", name, "\" (known: ", kOptimizerNames, ")"));
  }
  if (!(std::isfinite(learning_rate) && learning_rate > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer \"", name, "\": learning_rate must be finite and > 0, got ", learning_rate));
  }
  if ((name == "momentum" || name == "rmsprop") && !(momentum >= 0.0f && momentum < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer \"", name, "\": momentum must be in [0, 1), got ", momentum));
  }
  return absl::OkStatus();
}

}  // namespace psflow
