// Dropout on the CPU. The mask is a pure function of (layer seed, step, element index), so
// Backward recomputes it instead of storing it, and a step can be replayed exactly.
#ifndef PSFLOW_WORKER_BACKEND_CPU_DROPOUT_H_
#define PSFLOW_WORKER_BACKEND_CPU_DROPOUT_H_

#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Dropout final : public nn::Layer {
 public:
  Dropout(const nn::DropoutSpec& spec, std::string name) : Layer(std::move(name)), spec_(spec) {}

  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  // out[i] = in[i] * (kept(i) ? 1 / keep_prob : 0) with this step's mask.
  void ApplyMask(uint64_t step, const float* in, float* out, int64_t n) const;

  nn::DropoutSpec spec_;
  uint64_t seed_ = 0;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_DROPOUT_H_
