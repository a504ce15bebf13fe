// The optimizers psflow has and the settings every optimizer is given: the first checks of
// MakeOptimizer (core/optimizer.h), and what a model file's training section is checked against
// before any worker runs it. No protobuf here: psflow validate and the operator check model files
// with it and load no protobuf library.
#ifndef PSFLOW_CORE_OPTIMIZER_SETTINGS_H_
#define PSFLOW_CORE_OPTIMIZER_SETTINGS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow {

inline constexpr char kOptimizerNames[] = "sgd, momentum, adagrad, adam, rmsprop";

// INVALID_ARGUMENT, one line, unless `name` is one of kOptimizerNames, the learning rate is
// finite and > 0, and (momentum and rmsprop, which use it) the momentum lies in [0, 1) (0: the
// optimizer's default).
absl::Status CheckOptimizerSettings(absl::string_view name, float learning_rate, float momentum);

}  // namespace psflow

#endif  // PSFLOW_CORE_OPTIMIZER_SETTINGS_H_
