// Backend-independent descriptions of layers. A model is a list of these; a Backend turns each
// into a Layer that runs on its device.
//
// Shapes are per example (the batch dimension left out), images NHWC as TensorFlow's default:
// [height, width, channels]; sequences [time, features]; token ids are carried as floats.
#ifndef PSFLOW_WORKER_NN_LAYER_SPEC_H_
#define PSFLOW_WORKER_NN_LAYER_SPEC_H_

#include <variant>

#include "worker/nn/parameter_set.h"

namespace psflow::nn {

// y = x * kernel + bias over the last dimension of x (leading dimensions, e.g. time, are kept):
// kernel [in, units] (TensorFlow's layout), bias [units]. weight_decay > 0 adds
// weight_decay * sum(kernel^2) / 2 to the loss (the CIFAR-10 tutorial's L2 term).
struct DenseSpec {
  int units = 0;
  Initializer kernel_init = Initializer::GlorotUniform();
  Initializer bias_init = Initializer::Zeros();
  float weight_decay = 0;
  bool operator==(const DenseSpec&) const = default;
};

enum class ActivationKind { kSigmoid, kRelu, kTanh };

// Elementwise y = f(x); no parameters; any shape.
struct ActivationSpec {
  ActivationKind kind = ActivationKind::kRelu;
  bool operator==(const ActivationSpec&) const = default;
};

// TensorFlow's padding modes: kSame pads so that out = ceil(in / stride), kValid takes only
// whole windows: out = ceil((in - window + 1) / stride).
enum class Padding { kSame, kValid };

// 2-D convolution (cross-correlation, as tf.nn.conv2d) of [h, w, c] with `filters` kernels of
// kernel_size x kernel_size: kernel [k, k, c, filters], bias [filters]; output [h', w', filters].
struct Conv2DSpec {
  int filters = 0;
  int kernel_size = 0;
  int stride = 1;
  Padding padding = Padding::kSame;
  Initializer kernel_init = Initializer::GlorotUniform();
  Initializer bias_init = Initializer::Zeros();
  bool operator==(const Conv2DSpec&) const = default;
};

// Max over window x window patches of each channel (tf.nn.max_pool); padded positions never win.
struct MaxPoolSpec {
  int window = 2;
  int stride = 2;
  Padding padding = Padding::kSame;
  bool operator==(const MaxPoolSpec&) const = default;
};

// Local response normalisation across channels (tf.nn.lrn):
// y = x / (bias + alpha * sum_{|c'-c| <= depth_radius} x_c'^2) ^ beta. TensorFlow's defaults.
struct LrnSpec {
  int depth_radius = 5;
  float bias = 1.0f;
  float alpha = 1.0f;
  float beta = 0.5f;
  bool operator==(const LrnSpec&) const = default;
};

// [d0, d1, ...] -> [d0 * d1 * ...]: the reshape before a dense layer.
struct FlattenSpec {
  bool operator==(const FlattenSpec&) const = default;
};

// Training: each element kept with probability keep_prob and scaled by 1 / keep_prob
// (tf.nn.dropout); inference: identity. Masks are drawn from the model's seed and step.
struct DropoutSpec {
  float keep_prob = 1.0f;
  bool operator==(const DropoutSpec&) const = default;
};

// Token ids [time] (as floats) -> their rows of an embedding [vocab_size, dim]: [time, dim]. The
// gradient is sparse: only the rows of this step's ids are pushed.
struct EmbeddingSpec {
  int vocab_size = 0;
  int dim = 0;
  Initializer init = Initializer::Uniform(0.05f);
  bool operator==(const EmbeddingSpec&) const = default;
};

// One LSTM layer over a sequence [time, in] -> [time, units], TensorFlow's BasicLSTMCell:
// kernel [in + units, 4 * units] (rows: x then h; columns: gates i, j, f, o), bias [4 * units];
// c' = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j), h' = tanh(c') * sigmoid(o).
// In a model whose output has a time axis (a language model: a prediction per time step, its
// batches continuing each other's sequences) the state (c, h) after the last time step is the
// initial state of the next call, until Model::ResetState(); gradients stop at the initial state
// (truncated backpropagation). In a classifier (one prediction per example) every batch starts
// from zero state: its examples are independent.
struct LstmSpec {
  int units = 0;
  float forget_bias = 0.0f;
  Initializer init = Initializer::Uniform(0.05f);
  bool operator==(const LstmSpec&) const = default;
};

using LayerSpec = std::variant<DenseSpec, ActivationSpec, Conv2DSpec, MaxPoolSpec, LrnSpec,
                               FlattenSpec, DropoutSpec, EmbeddingSpec, LstmSpec>;

// "dense", "conv2d", ...: the prefix of the layer's parameter names.
const char* LayerKindName(const LayerSpec& spec);
// "sigmoid", "relu", "tanh".
const char* ActivationKindName(ActivationKind kind);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_LAYER_SPEC_H_
