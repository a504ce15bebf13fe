// The interface every layer implements, on every backend.
//
// Contract: activations are Matrix views [batch, elements per example] on the backend's device,
// allocated once by the Model for its largest batch; a call may use fewer rows. Layers allocate
// what they need (workspaces, saved state) in Build, for max_batch rows, and nothing in
// Forward/Backward. Backward *adds* parameter gradients into the ParameterSet's grads and
// *writes* dx. Backward follows the Forward of the same batch (layers may keep what it saved).
//
// Phases of a call: Prepare (host), then Forward and Backward (device), then the Model waits for
// the device (Backend::FinishGradients / Synchronize). Prepare does everything that needs the
// host: it checks the batch's inputs, reports sparse rows, and writes each call's values (the
// dropout step) into memory the device reads. Forward and Backward only queue device work, never
// wait for the device and never read a per-call value from the host: on a GPU the Model may record
// them once into a graph (--cuda_graphs) and replay that recording for later batches of the same
// size, so a value taken from `ctx` (step, host_input) at recording time would repeat forever.
#ifndef PSFLOW_WORKER_NN_LAYER_H_
#define PSFLOW_WORKER_NN_LAYER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
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
  // device), for Prepare only (null in Forward/Backward): an embedding reads its token ids here
  // to check them and know which rows it touches.
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

  // The host phase of a call of `rows` examples, before its Forward (training or inference; see
  // the phases above). INVALID_ARGUMENT naming the layer when the inputs are bad (a token id
  // outside the vocabulary); the call is then not run.
  virtual absl::Status Prepare(const RunContext& /*ctx*/, int64_t /*rows*/) {
    return absl::OkStatus();
  }

  // Sparse pulls: lists in `params` (ParameterSet::mutable_rows_to_pull) the rows of this
  // layer's sparse parameters that a call on `host_input` (the model's inputs, `rows` examples)
  // reads, with Prepare's checks and errors. Default: nothing (no sparse parameter).
  virtual absl::Status ListRowsRead(const float* /*host_input*/, int64_t /*rows*/,
                                    ParameterSet& /*params*/) const {
    return absl::OkStatus();
  }

  virtual void Forward(const RunContext& ctx, const Matrix& x, const Matrix& y) = 0;

  // dx may be null (first layer: no one needs it).
  virtual void Backward(const RunContext& ctx, const Matrix& x, const Matrix& y, const Matrix& dy,
                        const Matrix* dx) = 0;

  // Layers with state carried from call to call (an LSTM's) start again from zeros.
  virtual void ResetState() {}
  // ... or from the state the last Forward started from (queued on the device like Forward):
  // the Model runs one step twice when it checks a graph against the eager step.
  virtual void RewindState() {}

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
//
// A training step goes through the three phases of a layer call (see Layer): SetLabels (host),
// ForwardBackward (device: queued, never waits, may be recorded into a graph), Loss (host, after
// the Model waited for the device).
class SoftmaxCrossEntropy {
 public:
  virtual ~SoftmaxCrossEntropy() = default;
  // Host phase: checks `rows` host labels against [0, classes) and keeps a copy for the next
  // ForwardBackward (staged where the device reads it). INVALID_ARGUMENT naming the row and the
  // label; RESOURCE_EXHAUSTED when staging memory cannot be had.
  virtual absl::Status SetLabels(const int32_t* labels, int64_t rows, int64_t classes) = 0;
  // Device phase: the per-row losses of logits ([rows, classes] as set) against the labels set,
  // and dlogits (same shape) := scale * d(summed loss)/d(logits).
  virtual void ForwardBackward(const Matrix& logits, float scale, const Matrix& dlogits) = 0;
  // After the device finished the last ForwardBackward: its rows' losses summed in row order.
  virtual double Loss() const = 0;
  // Summed loss and the number of rows whose arg-max equals the label.
  struct Eval {
    double loss_sum = 0;
    int64_t correct = 0;
  };
  virtual Eval Evaluate(const Matrix& logits, const int32_t* labels) = 0;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_LAYER_H_
