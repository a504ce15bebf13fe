// The models of the distributed-TensorFlow seeds, by the name the worker's --model flag takes.
#ifndef PSFLOW_WORKER_MODELS_MODEL_ZOO_H_
#define PSFLOW_WORKER_MODELS_MODEL_ZOO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/nn/model.h"

namespace psflow::models {

// Seed 001: 784-100-10, sigmoid hidden layer, softmax cross-entropy.
nn::ModelSpec MnistMlp();

// NOT_FOUND listing the known names when `name` is not one of them.
absl::StatusOr<nn::ModelSpec> ModelByName(absl::string_view name);
std::vector<std::string> ModelNames();

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_MODEL_ZOO_H_
