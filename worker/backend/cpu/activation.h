// Elementwise activations on the CPU. Backward uses the saved output y (sigmoid: y(1-y),
// tanh: 1-y^2, relu: y > 0), so x is not needed.
#ifndef PSFLOW_WORKER_BACKEND_CPU_ACTIVATION_H_
#define PSFLOW_WORKER_BACKEND_CPU_ACTIVATION_H_

#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Activation final : public nn::Layer {
 public:
  Activation(const nn::ActivationSpec& spec, std::string name)
      : Layer(std::move(name)), kind_(spec.kind) {}

  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  nn::ActivationKind kind_;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_ACTIVATION_H_
