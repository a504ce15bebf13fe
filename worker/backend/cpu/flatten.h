// Flatten on the CPU: [d0, d1, ...] -> [d0 * d1 * ...]. Activations are already one row per
// example, so Forward and Backward copy.
#ifndef PSFLOW_WORKER_BACKEND_CPU_FLATTEN_H_
#define PSFLOW_WORKER_BACKEND_CPU_FLATTEN_H_

#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Flatten final : public nn::Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}

  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_FLATTEN_H_
