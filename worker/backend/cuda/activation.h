// Elementwise activations on a GPU, as the CPU layer (worker/backend/cpu/activation.h): sigmoid,
// relu or tanh; any shape, no parameters. Backward uses the saved output y (sigmoid: y(1-y),
// tanh: 1-y^2, relu: y > 0), so x is not needed. One kernel per call; allocates nothing.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_ACTIVATION_H_
#define PSFLOW_WORKER_BACKEND_CUDA_ACTIVATION_H_

#include <string>

#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Activation final : public nn::Layer {
 public:
  Activation(Context& ctx, const nn::ActivationSpec& spec, std::string name);

  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  Context& ctx_;
  nn::ActivationKind kind_;
  std::string where_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_ACTIVATION_H_
