// Local response normalisation on the CPU (tf.nn.local_response_normalization) across the last
// dimension (channels): n_c = bias + alpha * sum_{|c'-c| <= depth_radius} x_c'^2 (the sum clipped
// to existing channels, alpha not divided by the window), y_c = x_c * n_c^-beta. Backward is
// TensorFlow's LRNGrad: dx_j = dy_j n_j^-beta - 2 alpha beta x_j sum_{|i-j| <= r} dy_i y_i / n_i.
#ifndef PSFLOW_WORKER_BACKEND_CPU_LRN_H_
#define PSFLOW_WORKER_BACKEND_CPU_LRN_H_

#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "worker/backend/cpu/thread_pool.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Lrn final : public nn::Layer {
 public:
  // Positions are split over `pool` (null: this thread).
  Lrn(const nn::LrnSpec& spec, std::string name, ThreadPool* pool = nullptr)
      : Layer(std::move(name)), spec_(spec), pool_(pool) {}

  // Any input with at least one dimension; the last is the channels. INVALID_ARGUMENT when
  // depth_radius < 0, bias <= 0 or alpha < 0 (n must stay positive).
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  // Enough positions per range that a range is worth a thread's wake-up.
  static constexpr int64_t kPositionsPerRange = 256;

  // n for one position's channels: bias + alpha * windowed sums of x^2; terms is scratch.
  void Denominators(const float* x, float* terms, float* n) const;
  // This thread's scratch: 2 * channels_ floats.
  std::span<float> Scratch() const;
  // fn(p, terms, n) for every position (its channels start at element p) of `elements`, split
  // over the pool; terms and n are the calling thread's scratch, channels_ floats each.
  void ForPositions(int64_t elements,
                    absl::FunctionRef<void(int64_t p, float* terms, float* n)> fn) const;

  nn::LrnSpec spec_;
  ThreadPool* pool_;
  int64_t channels_ = 0;
  std::vector<float> scale_;  // n^-beta of each element of the last Forward
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_LRN_H_
