#include "worker/nn/layer_spec.h"

namespace psflow::nn {

const char* LayerKindName(const LayerSpec& spec) {
  static constexpr const char* kNames[] = {"dense",   "activation", "conv2d",    "maxpool", "lrn",
                                           "flatten", "dropout",    "embedding", "lstm"};
  static_assert(std::size(kNames) == std::variant_size_v<LayerSpec>);
  return kNames[spec.index()];
}

const char* ActivationKindName(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kSigmoid:
      return "sigmoid";
    case ActivationKind::kRelu:
      return "relu";
    case ActivationKind::kTanh:
      return "tanh";
  }
  return "?";
}

}  // namespace psflow::nn
