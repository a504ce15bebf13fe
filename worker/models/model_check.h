// The shapes through a model's layers, checked before anything is built: what `psflow validate`
// prints and what a model file's errors say. Pure: no backend, no allocation of parameters.
#ifndef PSFLOW_WORKER_MODELS_MODEL_CHECK_H_
#define PSFLOW_WORKER_MODELS_MODEL_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/nn/model_spec.h"

namespace psflow::models {

// One layer as it fits into the model.
struct LayerReport {
  std::string label;   // LayerLabel
  nn::Shape input;     // per example
  nn::Shape output;    // per example
  std::string detail;  // what decides the output, e.g. "kernel 5x5, stride 1, padding same"
  int64_t parameters = 0;
};

// The layer's type as model files spell it: "dense", "max_pool", "relu", ...
std::string LayerType(const nn::LayerSpec& layer);

// `layer 3 (conv2d "c2")`: how every message names layer i of `spec` (its type, its name).
std::string LayerLabel(const nn::ModelSpec& spec, size_t i);

// "28x28x1"; "scalar" for no dimensions.
std::string ShapeText(const nn::Shape& shape);

// Walks spec.layers from spec.input_shape. `token_inputs`: the inputs are token ids, which only an
// embedding as layer 0 reads. INVALID_ARGUMENT at the first problem, starting with the layer's
// label and naming the option and the shapes involved: a layer whose input does not have the
// dimensions it needs, an option out of range, a window larger than its (padded) input, two
// layers of one name, or a last layer that does not produce spec.num_classes values per
// prediction.
absl::StatusOr<std::vector<LayerReport>> CheckModel(const nn::ModelSpec& spec, bool token_inputs);

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_MODEL_CHECK_H_
