// Softmax cross-entropy on the CPU, numerically stable (logits shifted by their row maximum).
#ifndef PSFLOW_WORKER_BACKEND_CPU_SOFTMAX_CROSS_ENTROPY_H_
#define PSFLOW_WORKER_BACKEND_CPU_SOFTMAX_CROSS_ENTROPY_H_

#include <vector>

#include "worker/backend/cpu/thread_pool.h"
#include "worker/nn/layer.h"

namespace psflow::cpu {

// SetLabels keeps the caller's pointer (no copy): the labels must stay valid until the next
// ForwardBackward returns, which computes at once; Loss returns what it summed.
class SoftmaxCrossEntropy final : public nn::SoftmaxCrossEntropy {
 public:
  // ForwardBackward splits its rows over `pool` (null: this thread); Evaluate runs on one.
  explicit SoftmaxCrossEntropy(ThreadPool* pool = nullptr) : pool_(pool) {}

  absl::Status SetLabels(const int32_t* labels, int64_t rows, int64_t classes) override;
  void ForwardBackward(const nn::Matrix& logits, float scale, const nn::Matrix& dlogits) override;
  double Loss() const override { return loss_; }
  Eval Evaluate(const nn::Matrix& logits, const int32_t* labels) override;

 private:
  ThreadPool* pool_;
  const int32_t* labels_ = nullptr;
  std::vector<double> row_loss_;  // each row's, summed in order: the same total on any pool
  double loss_ = 0;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_SOFTMAX_CROSS_ENTROPY_H_
