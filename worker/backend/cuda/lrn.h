// Local response normalisation on a GPU (tf.nn.lrn) across the last dimension (channels), as
// the CPU layer (worker/backend/cpu/lrn.h): n_c = bias + alpha * sum_{|c'-c| <= depth_radius}
// x_c'^2 (clipped to existing channels, alpha not divided by the window), y_c = x_c * n_c^-beta;
// Backward is TensorFlow's LRNGrad, dx_j = dy_j n_j^-beta - 2 alpha beta x_j
// sum_{|i-j| <= r} dy_i y_i / n_i. No parameters.
//
// psflow's kernels (cnn_kernels.h), one thread per element (channels are contiguous in NHWC),
// not cuDNN's LRN: cuDNN divides alpha by the window size and documents its cross-channel LRN
// for NCHW; these kernels match TensorFlow (and the CPU layer) exactly. Forward keeps n^-beta
// of every element (max_batch rows, allocated at Build); Backward recomputes n (a band sum)
// and uses a scratch of the same size for the dy y / n terms.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_LRN_H_
#define PSFLOW_WORKER_BACKEND_CUDA_LRN_H_

#include <cstdint>
#include <string>

#include "worker/backend/cuda/cnn_kernels.h"
#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Lrn final : public nn::Layer {
 public:
  Lrn(Context& ctx, const nn::LrnSpec& spec, std::string name)
      : Layer(std::move(name)), ctx_(ctx), spec_(spec) {}

  // Any input with at least one dimension; the last is the channels. INVALID_ARGUMENT when
  // depth_radius < 0, bias <= 0 or alpha < 0; RESOURCE_EXHAUSTED when the GPU is full.
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  Context& ctx_;
  nn::LrnSpec spec_;
  std::string where_;
  int64_t max_elements_ = 0;  // max_batch rows
  LrnParams params_;
  DeviceArray<float> scale_;  // n^-beta of each element of the last Forward
  DeviceArray<float> terms_;  // Backward's dy y / n
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_LRN_H_
