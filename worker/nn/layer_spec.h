// Backend-independent descriptions of layers. A model is a list of these; a Backend turns each
// into a Layer that runs on its device. New layer kinds (conv, pooling, LRN, dropout, embedding,
// LSTM) are added here as new alternatives of LayerSpec and implemented by every backend.
#ifndef PSFLOW_WORKER_NN_LAYER_SPEC_H_
#define PSFLOW_WORKER_NN_LAYER_SPEC_H_

#include <variant>

namespace psflow::nn {

// y = x * kernel + bias; kernel [in, units] (TensorFlow's layout), bias [units].
struct DenseSpec {
  int units = 0;
};

enum class ActivationKind { kSigmoid, kRelu, kTanh };

// Elementwise y = f(x); no parameters.
struct ActivationSpec {
  ActivationKind kind = ActivationKind::kRelu;
};

using LayerSpec = std::variant<DenseSpec, ActivationSpec>;

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_LAYER_SPEC_H_
