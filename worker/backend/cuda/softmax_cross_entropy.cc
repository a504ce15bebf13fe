#include "worker/backend/cuda/softmax_cross_entropy.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/backend/cuda/kernels.h"
#include "worker/nn/batch_checks.h"

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
absl::Status AllocateDevice(Context& ctx, DeviceArray<T>& array, int64_t count,
                            absl::string_view what) {
  absl::StatusOr<DeviceArray<T>> a = ctx.Allocate<T>(count, what);
  if (!a.ok()) return a.status();
  array = *std::move(a);
  return absl::OkStatus();
}

}  // namespace

bool SoftmaxCrossEntropy::Ok(cudaError_t e) {
  ctx_.Check(e, where_);
  return e == cudaSuccess;
}

absl::Status SoftmaxCrossEntropy::Reserve(int64_t rows, int64_t cols) {
  if (rows <= capacity_ && cols == cols_) return absl::OkStatus();
  cols_ = cols;
  where_ = absl::StrCat("softmax cross-entropy [rows<=", std::max(rows, capacity_), ", ", cols,
                        " classes]");
  if (rows <= capacity_) return absl::OkStatus();
  // Free the old buffers first: no call is in flight (a step ends waiting for the stream).
  labels_.reset();
  row_loss_.reset();
  row_correct_.reset();
  host_labels_.reset();
  host_loss_.reset();
  host_correct_.reset();
  capacity_ = 0;
  const std::string what = absl::StrCat(where_, ": per-row labels and losses");
  RETURN_IF_ERROR(AllocateDevice(ctx_, labels_, rows, what));
  RETURN_IF_ERROR(AllocateDevice(ctx_, row_loss_, rows, what));
  RETURN_IF_ERROR(AllocateDevice(ctx_, row_correct_, rows, what));
  for (cudaError_t e : {AllocatePinned(host_labels_, rows), AllocatePinned(host_loss_, rows),
                        AllocatePinned(host_correct_, rows)}) {
    if (e != cudaSuccess) {
      cudaGetLastError();
      return CudaError(e, absl::StrCat(what, " in pinned host memory"));
    }
  }
  capacity_ = rows;
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropy::SetLabels(const int32_t* labels, int64_t rows, int64_t classes) {
  rows_ = 0;
  RETURN_IF_ERROR(Reserve(rows, classes));
  RETURN_IF_ERROR(nn::CheckLabels(where_, labels, rows, classes));
  std::copy(labels, labels + rows, host_labels_.get());
  rows_ = rows;
  return absl::OkStatus();
}

bool SoftmaxCrossEntropy::Queue(const nn::Matrix& logits, float scale, float* dlogits,
                                bool count_correct) {
  const int64_t rows = logits.rows, cols = logits.cols;
  if (rows > rows_) {
    ctx_.Fail(absl::InternalError(
        absl::StrCat(where_, ": ", rows, " rows of logits but ", rows_, " labels set")));
    return false;
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
  return !count_correct || Ok(cudaMemcpyAsync(host_correct_.get(), correct, bytes(sizeof(int32_t)),
                                              cudaMemcpyDeviceToHost, stream));
}

void SoftmaxCrossEntropy::ForwardBackward(const nn::Matrix& logits, float scale,
                                          const nn::Matrix& dlogits) {
  if (logits.rows > 0) Queue(logits, scale, dlogits.data, false);
}

double SoftmaxCrossEntropy::Loss() const {
  double total = 0;
  for (int64_t r = 0; r < rows_; ++r) total += host_loss_[r];
  return total;
}

SoftmaxCrossEntropy::Eval SoftmaxCrossEntropy::Evaluate(const nn::Matrix& logits,
                                                        const int32_t* labels) {
  Eval e;
  if (logits.rows <= 0) return e;
  if (absl::Status s = SetLabels(labels, logits.rows, logits.cols); !s.ok()) {
    ctx_.Fail(std::move(s));
    return e;
  }
  if (!Queue(logits, 0.0f, nullptr, true) || !Ok(cudaStreamSynchronize(ctx_.stream()))) return e;
  for (int64_t r = 0; r < logits.rows; ++r) {
    e.loss_sum += host_loss_[r];
    e.correct += host_correct_[r];
  }
  return e;
}

}  // namespace psflow::cuda
