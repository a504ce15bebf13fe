#include "worker/backend/cuda/softmax_cross_entropy.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/kernels.h"

namespace psflow::cuda {
namespace {

template <class T, class Deleter>
cudaError_t AllocatePinned(std::unique_ptr<T[], Deleter>& array, int64_t count) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, static_cast<size_t>(count) * sizeof(T));
  if (e == cudaSuccess) array.reset(static_cast<T*>(p));
  return e;
}

template <class T>
bool AllocateDevice(Context& ctx, DeviceArray<T>& array, int64_t count, absl::string_view what) {
  absl::StatusOr<DeviceArray<T>> a = ctx.Allocate<T>(count, what);
  if (!a.ok()) {
    ctx.Fail(a.status());
    return false;
  }
  array = *std::move(a);
  return true;
}

}  // namespace

bool SoftmaxCrossEntropy::Ok(cudaError_t e) {
  ctx_.Check(e, where_);
  return e == cudaSuccess;
}

bool SoftmaxCrossEntropy::Reserve(int64_t rows, int64_t cols) {
  if (rows <= capacity_ && cols == cols_) return true;
  cols_ = cols;
  where_ = absl::StrCat("softmax cross-entropy [rows<=", std::max(rows, capacity_), ", ", cols,
                        " classes]");
  if (rows <= capacity_) return true;
  // Free the old buffers first: no call is in flight (each one waits for the stream).
  labels_.reset();
  row_loss_.reset();
  row_correct_.reset();
  host_labels_.reset();
  host_loss_.reset();
  host_correct_.reset();
  capacity_ = 0;
  const std::string what = absl::StrCat(where_, ": per-row labels and losses");
  if (!AllocateDevice(ctx_, labels_, rows, what) || !AllocateDevice(ctx_, row_loss_, rows, what) ||
      !AllocateDevice(ctx_, row_correct_, rows, what) || !Ok(AllocatePinned(host_labels_, rows)) ||
      !Ok(AllocatePinned(host_loss_, rows)) || !Ok(AllocatePinned(host_correct_, rows))) {
    return false;
  }
  capacity_ = rows;
  return true;
}

bool SoftmaxCrossEntropy::Run(const nn::Matrix& logits, const int32_t* labels, float scale,
                              float* dlogits, bool count_correct) {
  const int64_t rows = logits.rows, cols = logits.cols;
  if (!Reserve(rows, cols)) return false;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0 || labels[r] >= cols) {
      ctx_.Fail(absl::InvalidArgumentError(absl::StrCat(where_, ": label ", labels[r], " of row ",
                                                        r, " is outside [0, ", cols, ")")));
      return false;
    }
    host_labels_[r] = labels[r];
  }
  cudaStream_t stream = ctx_.stream();
  const auto bytes = [rows](size_t element) { return static_cast<size_t>(rows) * element; };
  if (!Ok(cudaMemcpyAsync(labels_.get(), host_labels_.get(), bytes(sizeof(int32_t)),
                          cudaMemcpyHostToDevice, stream))) {
    return false;
  }
  int32_t* correct = count_correct ? row_correct_.get() : nullptr;
  LaunchSoftmaxCrossEntropy(logits.data, rows, cols, labels_.get(), scale, dlogits, row_loss_.get(),
                            correct, stream);
  if (!Ok(cudaGetLastError())) return false;
  if (!Ok(cudaMemcpyAsync(host_loss_.get(), row_loss_.get(), bytes(sizeof(double)),
                          cudaMemcpyDeviceToHost, stream))) {
    return false;
  }
  if (count_correct && !Ok(cudaMemcpyAsync(host_correct_.get(), correct, bytes(sizeof(int32_t)),
                                           cudaMemcpyDeviceToHost, stream))) {
    return false;
  }
  return Ok(cudaStreamSynchronize(stream));
}

double SoftmaxCrossEntropy::ForwardBackward(const nn::Matrix& logits, const int32_t* labels,
                                            float scale, const nn::Matrix& dlogits) {
  if (logits.rows <= 0 || !Run(logits, labels, scale, dlogits.data, false)) return 0;
  double total = 0;
  for (int64_t r = 0; r < logits.rows; ++r) total += host_loss_[r];
  return total;
}

SoftmaxCrossEntropy::Eval SoftmaxCrossEntropy::Evaluate(const nn::Matrix& logits,
                                                        const int32_t* labels) {
  Eval e;
  if (logits.rows <= 0 || !Run(logits, labels, 0.0f, nullptr, true)) return e;
  for (int64_t r = 0; r < logits.rows; ++r) {
    e.loss_sum += host_loss_[r];
    e.correct += host_correct_[r];
  }
  return e;
}

}  // namespace psflow::cuda
