// Flatten on a GPU, as the CPU layer (worker/backend/cpu/flatten.h): [d0, d1, ...] ->
// [d0 * d1 * ...]. Activations are already one row per example, so Forward and Backward are one
// device-to-device copy each, queued on the context's stream.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_FLATTEN_H_
#define PSFLOW_WORKER_BACKEND_CUDA_FLATTEN_H_

#include <string>

#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Flatten final : public nn::Layer {
 public:
  Flatten(Context& ctx, std::string name);

  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  void Copy(const float* from, float* to, int64_t n);

  Context& ctx_;
  std::string where_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_FLATTEN_H_
