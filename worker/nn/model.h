// A feed-forward model: layers in sequence, then softmax cross-entropy on the logits.
//
// All activation and activation-gradient buffers are allocated once, in Create(), for max_batch
// rows; ComputeGradients and Evaluate allocate nothing. Not thread-safe.
#ifndef PSFLOW_WORKER_NN_MODEL_H_
#define PSFLOW_WORKER_NN_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/nn/backend.h"
#include "worker/nn/layer_spec.h"

namespace psflow::nn {

struct ModelSpec {
  std::string name;
  Shape input_shape;  // per example, e.g. {784}
  int num_classes = 0;
  std::vector<LayerSpec> layers;  // the last produces num_classes logits
};

// One batch in host memory: inputs [size, NumElements(input_shape)], labels [size].
struct Batch {
  const float* inputs = nullptr;
  const int32_t* labels = nullptr;
  int64_t size = 0;
};

class Model {
 public:
  // INVALID_ARGUMENT when the layers do not fit together or do not end in num_classes outputs.
  // The backend must outlive the model.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const ModelSpec& spec, Backend& backend,
                                                       int64_t max_batch);

  const ModelSpec& spec() const { return spec_; }
  int64_t max_batch() const { return max_batch_; }
  ParameterSet& params() { return params_; }
  const ParameterSet& params() const { return params_; }

  // Sets params().grads() to d(mean loss)/d(params) on `batch` and returns the mean loss.
  // batch.size must be in [1, max_batch].
  float ComputeGradients(const Batch& batch);

  // Forward only (inference mode): summed loss and correct arg-max predictions.
  SoftmaxCrossEntropy::Eval Evaluate(const Batch& batch);

 private:
  Model(ModelSpec spec, Backend& backend, int64_t max_batch);
  const Matrix& Forward(const Batch& batch, bool training);
  Matrix View(const Backend::Buffer& buffer, size_t i, int64_t rows) const;

  ModelSpec spec_;
  Backend& backend_;
  int64_t max_batch_;
  ParameterSet params_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<SoftmaxCrossEntropy> loss_;
  std::vector<int64_t> widths_;  // elements per example of acts_[i]; acts_[0] is the input
  std::vector<Backend::Buffer> acts_;
  std::vector<Backend::Buffer> grads_;  // d(loss)/d(acts_[i]) for i >= 1
  std::vector<Matrix> views_;           // per call, sized to the batch (capacity reserved once)
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_MODEL_H_
