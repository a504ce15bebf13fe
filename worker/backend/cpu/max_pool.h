// Max pooling on the CPU (tf.nn.max_pool, NHWC): each channel's maximum over window x window
// patches; padded positions never win. Forward records, per output, the input position that won
// (the first maximum in row-major window order, as TensorFlow's MaxPoolGrad), and Backward routes
// each dy there; overlapping windows accumulate.
#ifndef PSFLOW_WORKER_BACKEND_CPU_MAX_POOL_H_
#define PSFLOW_WORKER_BACKEND_CPU_MAX_POOL_H_

#include <cstdint>
#include <vector>

#include "worker/backend/cpu/thread_pool.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class MaxPool final : public nn::Layer {
 public:
  // Examples are split over `pool` (null: this thread).
  MaxPool(const nn::MaxPoolSpec& spec, std::string name, ThreadPool* pool = nullptr)
      : Layer(std::move(name)), spec_(spec), pool_(pool) {}

  // INVALID_ARGUMENT unless input is [height, width, channels] (each >= 1), window and stride
  // are >= 1, and a kValid window fits in the input.
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  // Forward for examples [begin, end).
  void ForwardExamples(const nn::Matrix& x, const nn::Matrix& y, int64_t begin, int64_t end);

  nn::MaxPoolSpec spec_;
  ThreadPool* pool_;
  int64_t in_h_ = 0, in_w_ = 0, c_ = 0;
  int64_t out_h_ = 0, out_w_ = 0;
  int64_t pad_top_ = 0, pad_left_ = 0;
  // Per output element of the last Forward: the winner's index within its example's input.
  std::vector<int32_t> argmax_;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_MAX_POOL_H_
