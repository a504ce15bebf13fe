// Softmax cross-entropy on a GPU, as the CPU class (worker/backend/cpu/softmax_cross_entropy.h):
// per row a numerically stable softmax (logits shifted by the row maximum, exponentials summed in
// double), the loss log(sum) - (logit[label] - max), and dlogits = scale * (softmax - onehot);
// Evaluate counts rows whose first arg-max is the label (std::max_element's tie rule). One block
// per row on the context's stream.
//
// Host synchronisation: the contract returns host values (the loss, the count), so every call
// copies the per-row results into pinned host memory and waits for the stream
// (cudaStreamSynchronize): everything queued before it (the forward pass) finishes first. The
// rows are summed on the host in row order, as the CPU class sums them.
//
// Labels arrive as host int32s: they are checked against [0, classes) (an error otherwise),
// staged in pinned memory and copied to the device asynchronously.
//
// Memory: there is no Build. Device and pinned buffers are allocated on first use and grown only
// when a call has more rows than any before it, so in steady state only the first step
// allocates. Errors (allocation, a copy, the launch, a bad label) are recorded in the Context
// (Fail / Check) and the call returns 0 (an empty Eval); Synchronize / FinishGradients report
// them.
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

  double ForwardBackward(const nn::Matrix& logits, const int32_t* labels, float scale,
                         const nn::Matrix& dlogits) override;
  Eval Evaluate(const nn::Matrix& logits, const int32_t* labels) override;

 private:
  struct PinnedFree {
    void operator()(void* p) const { cudaFreeHost(p); }
  };
  template <class T>
  using PinnedArray = std::unique_ptr<T[], PinnedFree>;

  // Per-row losses (and correct flags when count_correct) of logits into host_loss_ /
  // host_correct_, dlogits written when non-null; waits for the stream. False on failure
  // (recorded in the context).
  bool Run(const nn::Matrix& logits, const int32_t* labels, float scale, float* dlogits,
           bool count_correct);
  // Buffers for `rows` rows (grown when needed) and where_ for this shape.
  bool Reserve(int64_t rows, int64_t cols);
  // Records e as the context's error; true when it is cudaSuccess.
  bool Ok(cudaError_t e);

  Context& ctx_;
  std::string where_;
  int64_t capacity_ = 0;  // rows the buffers hold
  int64_t cols_ = -1;     // the classes where_ names
  DeviceArray<int32_t> labels_;
  DeviceArray<double> row_loss_;
  DeviceArray<int32_t> row_correct_;
  PinnedArray<int32_t> host_labels_;
  PinnedArray<double> host_loss_;
  PinnedArray<int32_t> host_correct_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_SOFTMAX_CROSS_ENTROPY_H_
