// Dense layer on the CPU: OpenBLAS sgemm for x*W, dx = dy*W^T and dW += x^T*dy, over the rows
// of x's last dimension (all time steps of all examples in one product).
#ifndef PSFLOW_WORKER_BACKEND_CPU_DENSE_H_
#define PSFLOW_WORKER_BACKEND_CPU_DENSE_H_

#include "worker/backend/cpu/thread_pool.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Dense final : public nn::Layer {
 public:
  // Products split over `pool` (null: this thread).
  Dense(const nn::DenseSpec& spec, std::string name, ThreadPool* pool = nullptr)
      : Layer(std::move(name)), spec_(spec), pool_(pool) {}

  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;
  double RegularizationLoss(const nn::ParameterSet& params) const override;

 private:
  nn::DenseSpec spec_;
  ThreadPool* pool_;
  int64_t in_ = 0;
  int64_t positions_ = 1;  // product of the leading dimensions (time steps)
  nn::ParameterSet::Handle kernel_ = -1;
  nn::ParameterSet::Handle bias_ = -1;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_DENSE_H_
