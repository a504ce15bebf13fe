// Local response normalisation on the CPU (tf.nn.local_response_normalization) across the last
// dimension (channels): n_c = bias + alpha * sum_{|c'-c| <= depth_radius} x_c'^2 (the sum clipped
// to existing channels, alpha not divided by the window), y_c = x_c * n_c^-beta. Backward is
// TensorFlow's LRNGrad: dx_j = dy_j n_j^-beta - 2 alpha beta x_j sum_{|i-j| <= r} dy_i y_i / n_i.
#ifndef PSFLOW_WORKER_BACKEND_CPU_LRN_H_
#define PSFLOW_WORKER_BACKEND_CPU_LRN_H_

#include <vector>

#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Lrn final : public nn::Layer {
 public:
  Lrn(const nn::LrnSpec& spec, std::string name) : Layer(std::move(name)), spec_(spec) {}

  // Any input with at least one dimension; the last is the channels. INVALID_ARGUMENT when
  // depth_radius < 0, bias <= 0 or alpha < 0 (n must stay positive).
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  // n for one position's channels: band_ = bias + alpha * windowed sums of x^2.
  void Denominators(const float* x);

  nn::LrnSpec spec_;
  int64_t channels_ = 0;
  std::vector<float> scale_;  // n^-beta of each element of the last Forward
  std::vector<float> band_;   // one position's channels
  std::vector<float> terms_;  // one position's channels
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_LRN_H_
