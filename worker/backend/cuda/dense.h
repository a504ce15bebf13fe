// Dense layer on a GPU, as the CPU layer (worker/backend/cpu/dense.h): y = x * kernel + bias over
// the last dimension of x, leading dimensions (time steps) kept, so all rows * positions rows go
// through one cuBLAS product. Parameters `<name>/kernel` [in, units] (TensorFlow's layout) and
// `<name>/bias` [units] with the spec's initialisers. weight_decay > 0: RegularizationLoss is
// weight_decay * sum(kernel^2) / 2, computed on the host from the host values (uploaded before
// each step), and Backward adds its gradient weight_decay * kernel on the device.
//
// Forward: y = broadcast(bias), then y += x W. Backward: dW += x^T dy (+ decay), db += column sums
// of dy, dx = dy W^T when dx is wanted. Allocates nothing after Build; never waits for the GPU.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_DENSE_H_
#define PSFLOW_WORKER_BACKEND_CUDA_DENSE_H_

#include <string>

#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Dense final : public nn::Layer {
 public:
  Dense(Context& ctx, const nn::DenseSpec& spec, std::string name);

  // Input [..., in], output [..., units]. INVALID_ARGUMENT for units < 1 or a scalar input.
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;
  double RegularizationLoss(const nn::ParameterSet& params) const override;

 private:
  Context& ctx_;
  nn::DenseSpec spec_;
  std::string where_;
  int64_t in_ = 0;
  int64_t positions_ = 1;  // product of the leading dimensions (time steps)
  nn::ParameterSet::Handle kernel_ = -1;
  nn::ParameterSet::Handle bias_ = -1;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_DENSE_H_
