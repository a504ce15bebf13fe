// Softmax cross-entropy on a GPU, as the CPU class (worker/backend/cpu/softmax_cross_entropy.h):
// per row a numerically stable softmax (logits shifted by the row maximum, exponentials summed in
// double), the loss log(sum) - (logit[label] - max), and dlogits = scale * (softmax - onehot);
// Evaluate counts rows whose first arg-max is the label (std::max_element's tie rule). One block
// per row on the context's stream.
//
// Training (the phases of worker/nn/layer.h): SetLabels checks the host int32 labels against
// [0, classes) and stages them in pinned memory; ForwardBackward queues their copy to the device,
// the kernel and the copy of the per-row losses back into pinned memory, and waits for nothing
// (it can be recorded into a graph: every address it uses is fixed once the buffers have grown to
// the largest call); Loss, called once the stream finished, sums those rows on the host in row
// order, as the CPU class sums them. Evaluate does all three and waits for the stream
// (cudaStreamSynchronize): everything queued before it (the forward pass) finishes first.
//
// Memory: there is no Build. Device and pinned buffers are allocated by SetLabels (or Evaluate)
// and grown only when a call has more rows than any before it (freed and reallocated: no recorded
// graph may use them then; the Model records its largest batch only), so in steady state only the
// first step allocates. Evaluate's errors (allocation, a copy, the launch, a bad label) are
// recorded in the Context (Fail / Check) and it returns an empty Eval; Synchronize reports them.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_SOFTMAX_CROSS_ENTROPY_H_
#define PSFLOW_WORKER_BACKEND_CUDA_SOFTMAX_CROSS_ENTROPY_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"

namespace psflow::cuda {

class SoftmaxCrossEntropy final : public nn::SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(Context& ctx) : ctx_(ctx) {}

  absl::Status SetLabels(const int32_t* labels, int64_t rows, int64_t classes) override;
  void ForwardBackward(const nn::Matrix& logits, float scale, const nn::Matrix& dlogits) override;
  double Loss() const override;
  Eval Evaluate(const nn::Matrix& logits, const int32_t* labels) override;

 private:
  struct PinnedFree {
    void operator()(void* p) const { cudaFreeHost(p); }
  };
  template <class T>
  using PinnedArray = std::unique_ptr<T[], PinnedFree>;

  // Queues the per-row losses (and correct flags when count_correct) of logits against the
  // staged labels into host_loss_ / host_correct_, dlogits written when non-null. False on
  // failure (recorded in the context).
  bool Queue(const nn::Matrix& logits, float scale, float* dlogits, bool count_correct);
  // Buffers for `rows` rows (grown when needed) and where_ for this shape.
  absl::Status Reserve(int64_t rows, int64_t cols);
  // Records e as the context's error; true when it is cudaSuccess.
  bool Ok(cudaError_t e);

  Context& ctx_;
  std::string where_;
  int64_t capacity_ = 0;  // rows the buffers hold
  int64_t cols_ = -1;     // the classes where_ names
  int64_t rows_ = 0;      // the rows SetLabels staged
  DeviceArray<int32_t> labels_;
  DeviceArray<double> row_loss_;
  DeviceArray<int32_t> row_correct_;
  PinnedArray<int32_t> host_labels_;
  PinnedArray<double> host_loss_;
  PinnedArray<int32_t> host_correct_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_SOFTMAX_CROSS_ENTROPY_H_
