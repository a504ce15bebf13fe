#include "worker/backend/cuda/context.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow::cuda {

absl::Status CudaError(cudaError_t e, absl::string_view what) {
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    return absl::FailedPreconditionError(message);
  }
  return absl::InternalError(message);
}

absl::Status CublasError(cublasStatus_t s, absl::string_view what) {
  const std::string message =
      absl::StrCat(what, ": cuBLAS ", cublasGetStatusName(s), ": ", cublasGetStatusString(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status CudnnError(cudnnStatus_t s, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": cuDNN ", cudnnGetErrorString(s));
  if (s == CUDNN_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  // cuDNN has no kernel for this configuration on this GPU (e.g. a persistent RNN on an H100).
  if (s == CUDNN_STATUS_NOT_SUPPORTED) return absl::UnimplementedError(message);
  return absl::InternalError(message);
}

absl::StatusOr<int> VisibleDeviceCount() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA GPU is usable: ", cudaGetErrorString(e)));
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Context>> Context::Create(int device, nn::Precision precision) {
  absl::StatusOr<int> count = VisibleDeviceCount();
  if (!count.ok()) return count.status();
  if (device < 0 || device >= *count) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", device, " requested but ", *count, " CUDA GPU(s) are visible",
                     *count == 0 ? "" : absl::StrCat(" (indexes 0..", *count - 1, ")")));
  }
  std::unique_ptr<Context> c(new Context());
  c->device_ = device;
  c->precision_ = precision;
  const std::string where = absl::StrCat("GPU ", device);
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return CudaError(e, where);
  if (cudaError_t e = cudaGetDeviceProperties(&c->properties_, device); e != cudaSuccess) {
    return CudaError(e, where);
  }
  if (cudaError_t e = cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError(e, where);
  }
  if (cudaError_t e = cudaStreamCreateWithFlags(&c->copy_stream_, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError(e, where);
  }
  if (cublasStatus_t s = cublasCreate(&c->cublas_); s != CUBLAS_STATUS_SUCCESS) {
    return CublasError(s, where);
  }
  if (cublasStatus_t s = cublasSetStream(c->cublas_, c->stream_); s != CUBLAS_STATUS_SUCCESS) {
    return CublasError(s, where);
  }
  // Matrix products name their compute type (gemm_compute); the handle's own math stays exact
  // for anything else it runs (axpy).
  if (cublasStatus_t s = cublasSetMathMode(c->cublas_, CUBLAS_DEFAULT_MATH);
      s != CUBLAS_STATUS_SUCCESS) {
    return CublasError(s, where);
  }
  if (cudnnStatus_t s = cudnnCreate(&c->cudnn_); s != CUDNN_STATUS_SUCCESS) {
    return CudnnError(s, where);
  }
  if (cudnnStatus_t s = cudnnSetStream(c->cudnn_, c->stream_); s != CUDNN_STATUS_SUCCESS) {
    return CudnnError(s, where);
  }
  return c;
}

Context::~Context() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
  workspace_.reset();
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::StatusOr<void*> Context::AllocateBytes(size_t bytes, absl::string_view what) {
  void* p = nullptr;
  const size_t n = bytes == 0 ? 256 : bytes;
  if (cudaError_t e = cudaMalloc(&p, n); e != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of GPU memory: %s needs %.1f MiB, GPU %d has %.1f of %.1f MiB free (%s)", what,
        n / 1048576.0, device_, free_bytes / 1048576.0, total_bytes / 1048576.0,
        cudaGetErrorString(e)));
  }
  // On the compute stream: a memset on the legacy default stream is not ordered before work on
  // the (non-blocking) streams that will use this memory.
  if (cudaError_t e = cudaMemsetAsync(p, 0, n, stream_); e != cudaSuccess) {
    cudaFree(p);
    return CudaError(e, what);
  }
  return p;
}

cublasComputeType_t Context::gemm_compute() const {
  switch (precision_) {
    case nn::Precision::kFp32:
      return CUBLAS_COMPUTE_32F;
    case nn::Precision::kTf32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case nn::Precision::kBf16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
    case nn::Precision::kFp16:
      return CUBLAS_COMPUTE_32F_FAST_16F;
  }
  return CUBLAS_COMPUTE_32F;
}

cudnnMathType_t Context::cudnn_math() const {
  switch (precision_) {
    case nn::Precision::kFp32:
      return CUDNN_FMA_MATH;
    case nn::Precision::kTf32:
    case nn::Precision::kBf16:
      return CUDNN_DEFAULT_MATH;
    case nn::Precision::kFp16:
      return CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  }
  return CUDNN_FMA_MATH;
}

absl::Status Context::ReserveWorkspace(size_t bytes, absl::string_view what) {
  if (bytes <= workspace_bytes_) return absl::OkStatus();
  absl::StatusOr<DeviceArray<char>> w = Allocate<char>(static_cast<int64_t>(bytes), what);
  if (!w.ok()) return w.status();
  // The old workspace may still be in use by queued work.
  if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) return CudaError(e, what);
  workspace_ = *std::move(w);
  workspace_bytes_ = bytes;
  return absl::OkStatus();
}

void Context::Fail(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
}

absl::Status Context::Synchronize(absl::string_view where) {
  Check(cudaStreamSynchronize(stream_), where);
  Check(cudaStreamSynchronize(copy_stream_), where);
  absl::Status error = std::move(error_);
  error_ = absl::OkStatus();
  return error;
}

}  // namespace psflow::cuda
