// A model as data: its input, its layers in sequence (layer_spec.h) and the classes its logits
// score. nn::Model (model.h) builds one on a backend; model files (worker/models/model_file.h)
// describe one.
#ifndef PSFLOW_WORKER_NN_MODEL_SPEC_H_
#define PSFLOW_WORKER_NN_MODEL_SPEC_H_

#include <cstddef>
#include <string>
#include <vector>

#include "worker/nn/layer_spec.h"
#include "worker/nn/tensor.h"

namespace psflow::nn {

struct ModelSpec {
  std::string name;
  Shape input_shape;  // per example, e.g. {784}, {24, 24, 3} or {35} (token ids)
  int num_classes = 0;
  std::vector<LayerSpec> layers;  // the last produces [..., num_classes] logits
  // Names of the layers, by index, as their parameters are named ("<name>/kernel"); a missing or
  // empty one is LayerName's default.
  std::vector<std::string> layer_names{};

  // Layer i's name: layer_names[i] where given, else its kind and index ("dense2").
  std::string LayerName(size_t i) const;
  bool operator==(const ModelSpec&) const = default;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_MODEL_SPEC_H_
