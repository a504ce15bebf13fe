// Max pooling on a GPU (tf.nn.max_pool, NHWC), as the CPU layer (worker/backend/cpu/max_pool.h):
// each channel's maximum over window x window patches under TensorFlow's padding (SAME pads
// max((out - 1) * stride + window - in, 0), the smaller half before); padded positions never
// win; ties go to the first maximum in row-major window order.
//
// psflow's kernels (cnn_kernels.h), not cuDNN's pooling: cuDNN pads symmetrically and cannot
// express SAME's asymmetric padding (e.g. 3x3 stride 2 on 24x24 pads 0 before and 1 after).
// Forward records each output's winner (an int32 index per output, allocated at Build for
// max_batch rows); Backward is a deterministic gather: each input position sums dy over the
// outputs it won, in row-major output order (overlapping windows included), and writes dx.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_MAX_POOL_H_
#define PSFLOW_WORKER_BACKEND_CUDA_MAX_POOL_H_

#include <cstdint>
#include <string>

#include "worker/backend/cuda/cnn_kernels.h"
#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class MaxPool final : public nn::Layer {
 public:
  MaxPool(Context& ctx, const nn::MaxPoolSpec& spec, std::string name)
      : Layer(std::move(name)), ctx_(ctx), spec_(spec) {}

  // INVALID_ARGUMENT unless input is [height, width, channels] (each >= 1), window and stride
  // are >= 1, and a kValid window fits in the input; RESOURCE_EXHAUSTED when the GPU is full.
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  Context& ctx_;
  nn::MaxPoolSpec spec_;
  std::string where_;
  int64_t max_batch_ = 0;
  PoolGeometry geometry_;
  // Per output element of the last Forward: the winner's index within its example's input.
  DeviceArray<int32_t> argmax_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_MAX_POOL_H_
