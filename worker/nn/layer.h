// The interface every layer implements, on every backend.
//
// Contract: activations are Matrix views [batch, elements per example] on the backend's device,
// allocated once by the Model for its largest batch; a call may use fewer rows. Layers allocate
// what they need (workspaces, saved state) in Build, for max_batch rows, and nothing in
// Forward/Backward. Backward *adds* parameter gradients into the ParameterSet's grads and
// *writes* dx. Backward follows the Forward of the same batch (layers may keep what it saved).
#ifndef PSFLOW_WORKER_NN_LAYER_H_
#define PSFLOW_WORKER_NN_LAYER_H_

#include <string>

#include "absl/status/statusor.h"
#include "worker/nn/parameter_set.h"
#include "worker/nn/tensor.h"

namespace psflow::nn {

// What a layer may use while it runs: the parameters and the mode. Backends extend the state
// they need (BLAS threads, cuBLAS handle and stream, RNG) inside their own layer objects.
struct RunContext {
  ParameterSet* params = nullptr;
  bool training = true;
  uint64_t step = 0;  // counts training steps: dropout masks derive from (seed, step)
  // The batch's inputs in host memory (what the first layer's x holds, before the copy to the
  // device): an embedding on a GPU reads its token ids here to know which rows it touches.
  const float* host_input = nullptr;
  // Backward computes the gradients of loss_scale times the loss (loss scaling): a layer that
  // adds a regularisation term's gradient itself multiplies it by this.
  float loss_scale = 1;
};

// What a layer may use while it is built.
struct BuildContext {
  ParameterSet* params = nullptr;
  int64_t max_batch = 1;  // most rows a call will pass
  uint64_t seed = 1;      // this layer's own seed (for random masks)
};

class Layer {
 public:
  virtual ~Layer() = default;

  const std::string& name() const { return name_; }

  // Declares this layer's parameters (names prefixed with name()) given the per-example input
  // shape, allocates its workspaces, and returns the per-example output shape. Called once,
  // before params.Finalize(). INVALID_ARGUMENT when the input shape does not suit the layer.
  virtual absl::StatusOr<Shape> Build(const Shape& input, const BuildContext& ctx) = 0;

  virtual void Forward(const RunContext& ctx, const Matrix& x, const Matrix& y) = 0;

  // dx may be null (first layer: no one needs it).
  virtual void Backward(const RunContext& ctx, const Matrix& x, const Matrix& y, const Matrix& dy,
                        const Matrix* dx) = 0;

  // Layers with state carried from call to call (an LSTM's) start again from zeros.
  virtual void ResetState() {}

  // Added to the loss (e.g. weight decay); Backward adds its gradient.
  virtual double RegularizationLoss(const ParameterSet& /*params*/) const { return 0; }

 protected:
  explicit Layer(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// Softmax over each row followed by cross-entropy against integer class labels
// (TensorFlow's sparse_softmax_cross_entropy_with_logits). A row is one prediction: one per
// example for a classifier, one per time step for a language model.
class SoftmaxCrossEntropy {
 public:
  virtual ~SoftmaxCrossEntropy() = default;
  // Returns the summed loss of all rows and writes scale * d(summed loss)/d(logits) into dlogits
  // (same shape as logits). labels: logits.rows host integers in [0, logits.cols).
  virtual double ForwardBackward(const Matrix& logits, const int32_t* labels, float scale,
                                 const Matrix& dlogits) = 0;
  // Summed loss and the number of rows whose arg-max equals the label.
  struct Eval {
    double loss_sum = 0;
    int64_t correct = 0;
  };
  virtual Eval Evaluate(const Matrix& logits, const int32_t* labels) = 0;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_LAYER_H_
