// Model files: a model, how it trains and the data it reads, as YAML or JSON (JSON is read as
// the YAML it is). docs/model-files.md is the reference; deploy/models/ holds the seeds' models.
//
//   name: mnist_mlp
//   input: {shape: [784]}             # per example; type: float32 (default) or token_ids
//   classes: 10
//   layers:
//     - {type: dense, name: hidden, units: 100}
//     - {type: sigmoid}
//     - {type: dense, units: 10}
//   loss: softmax_cross_entropy        # the only loss (optional)
//   training: {optimizer: sgd, learning_rate: 0.001, batch_size: 100, epochs: 20}
//   data: {format: mnist}
//
// Every key is checked: an unknown one (a typo) is an error naming the keys that are known.
#ifndef PSFLOW_WORKER_MODELS_MODEL_FILE_H_
#define PSFLOW_WORKER_MODELS_MODEL_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/models/model_definition.h"

namespace psflow::models {

// Parses and checks a model file's text; `source` names it in errors. INVALID_ARGUMENT in one
// line: "<source>:<line>: <where>: <what>" for a bad value or key (where is e.g.
// `layer 3 (conv2d "c2")`, `training` or `data`), "<source>: <CheckModel's message>" for layers
// that do not fit together (worker/models/model_check.h), or for data whose format contradicts
// the model (a language-model format without token_ids input, mnist data for a 32x32 input).
// The result's `source` is `text`.
absl::StatusOr<ModelDefinition> ParseModelFile(absl::string_view text, absl::string_view source);

// ParseModelFile of the file at `path`; core/read_file.h's error when it cannot be read.
absl::StatusOr<ModelDefinition> ReadModelFile(const std::string& path);

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_MODEL_FILE_H_
