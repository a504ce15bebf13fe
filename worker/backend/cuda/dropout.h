// Dropout on a GPU, as the CPU layer (worker/backend/cpu/dropout.h). Training: each element kept
// with probability keep_prob and scaled by 1 / keep_prob; inference (and keep_prob 1): a copy.
// The mask is a pure function of (the BuildContext seed, RunContext::step, element index) — the
// CPU layer's hash, so the masks equal the CPU's bit for bit — and Backward recomputes it instead
// of storing it: the same mask as the Forward of the same step. Allocates nothing.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_DROPOUT_H_
#define PSFLOW_WORKER_BACKEND_CUDA_DROPOUT_H_

#include <cstdint>
#include <string>

#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Dropout final : public nn::Layer {
 public:
  Dropout(Context& ctx, const nn::DropoutSpec& spec, std::string name);

  // INVALID_ARGUMENT unless keep_prob is in (0, 1].
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  // out = in * mask(step) / keep_prob when keep_prob < 1 and `masked`; a copy otherwise.
  void Apply(bool masked, uint64_t step, const float* in, float* out, int64_t n);

  Context& ctx_;
  nn::DropoutSpec spec_;
  uint64_t seed_ = 0;  // the BuildContext's; the launcher mixes it as the CPU layer does
  std::string where_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_DROPOUT_H_
