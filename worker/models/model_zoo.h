// The seeds' models by the name the worker's --model flag takes: deploy/models/<name>.yaml,
// model files like any user's (worker/models/model_file.h), built into the binaries
// (seed_model_files.h). --model=NAME and --model_file=deploy/models/NAME.yaml are one path.
#ifndef PSFLOW_WORKER_MODELS_MODEL_ZOO_H_
#define PSFLOW_WORKER_MODELS_MODEL_ZOO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/models/model_definition.h"

namespace psflow::models {

// `name` is mnist_mlp, mnist_cnn, cifar10_cnn or ptb_lstm; `config` names ptb_lstm's
// configuration (small, medium, large, test; empty: small) and must be empty for the others: the
// model file <name>.yaml, or ptb_lstm_<config>.yaml. NOT_FOUND listing the known names when
// either is unknown; INVALID_ARGUMENT for a config given to a model without configs.
absl::StatusOr<ModelDefinition> FindModel(absl::string_view name, absl::string_view config);
std::vector<std::string> ModelNames();
std::vector<std::string> PtbConfigNames();

// For tests and benchmarks: the network of the built-in model file `file` (e.g. "mnist_mlp",
// "ptb_lstm_test"). Aborts when there is no such file.
nn::ModelSpec SeedSpec(absl::string_view file);
// `spec` with its input's first dimension (a language model's time steps) set to `steps`.
nn::ModelSpec WithSequenceLength(nn::ModelSpec spec, int steps);

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_MODEL_ZOO_H_
