// What every CUDA layer of one backend shares: the device, two streams (compute; copies of
// gradients to the host), the cuBLAS and cuDNN handles, one cuDNN workspace, and the first error.
//
// Errors: kernels and library calls run asynchronously, so a layer cannot return a Status from
// Forward/Backward. It reports a failed launch or call with Check(..., where), where `where` names
// the layer and its shapes ("conv2d0 [128, 24, 24, 3] -> [128, 24, 24, 64]"); the context keeps
// the first one, and Backend::FinishGradients / Synchronize return it. After an error the step's
// results are garbage and the worker stops.
//
// Memory: everything a layer needs is allocated in Build (Allocate, ReserveWorkspace); a training
// step allocates nothing. Not thread-safe: one thread drives one context.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_CONTEXT_H_
#define PSFLOW_WORKER_BACKEND_CUDA_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/nn/precision.h"

namespace psflow::cuda {

// Frees device memory from cudaMalloc.
struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
template <class T>
using DeviceArray = std::unique_ptr<T[], DeviceFree>;

// "<what>: <cuda error name>: <description>" etc. CudnnError: RESOURCE_EXHAUSTED when cuDNN could
// not allocate, UNIMPLEMENTED when it has no kernel for the configuration on this GPU, else
// INTERNAL.
absl::Status CudaError(cudaError_t e, absl::string_view what);
absl::Status CublasError(cublasStatus_t s, absl::string_view what);
absl::Status CudnnError(cudnnStatus_t s, absl::string_view what);

// The number of CUDA devices this process can see; FAILED_PRECONDITION with the driver's reason
// ("no CUDA-capable device is detected", "CUDA driver version is insufficient") when none.
absl::StatusOr<int> VisibleDeviceCount();

class Context {
 public:
  // Selects `device` (an index among the visible ones) and creates the streams and handles;
  // products run in `precision` (nn/precision.h; kFp32: exact fp32 as the CPU reference).
  static absl::StatusOr<std::unique_ptr<Context>> Create(int device, nn::Precision precision);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  const cudaDeviceProp& properties() const { return properties_; }
  cudaStream_t stream() const { return stream_; }
  cudaStream_t copy_stream() const { return copy_stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  nn::Precision precision() const { return precision_; }
  // Whether products may leave exact fp32 (every precision but fp32): cuDNN algorithms offered
  // with tensor-op math may be used; otherwise descriptors are set to CUDNN_FMA_MATH.
  bool allow_tensor_ops() const { return precision_ != nn::Precision::kFp32; }
  // The cuBLAS compute type of every matrix product (RowMajorGemm): CUBLAS_COMPUTE_32F,
  // _32F_FAST_TF32, _32F_FAST_16BF or _32F_FAST_16F.
  cublasComputeType_t gemm_compute() const;
  // The math type cuDNN convolutions and RNNs are set up with: CUDNN_FMA_MATH (fp32),
  // CUDNN_DEFAULT_MATH (TF32 allowed: tf32 and bf16, which cuDNN cannot convert fp32 to) or
  // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (fp16).
  cudnnMathType_t cudnn_math() const;

  // `count` zeroed elements of device memory. RESOURCE_EXHAUSTED naming `what` and the size
  // when the device is out of memory.
  template <class T>
  absl::StatusOr<DeviceArray<T>> Allocate(int64_t count, absl::string_view what) {
    absl::StatusOr<void*> p = AllocateBytes(static_cast<size_t>(count) * sizeof(T), what);
    if (!p.ok()) return p.status();
    return DeviceArray<T>(static_cast<T*>(*p));
  }

  // Grows the shared cuDNN workspace to at least `bytes` (Build only). Layers use it one at a
  // time, on the compute stream.
  absl::Status ReserveWorkspace(size_t bytes, absl::string_view what);
  void* workspace() const { return workspace_.get(); }
  size_t workspace_bytes() const { return workspace_bytes_; }

  // Keep the first failure; `where` names the layer and shapes. Cheap when all is well.
  void Check(cudaError_t e, absl::string_view where) {
    if (e != cudaSuccess) Fail(CudaError(e, where));
  }
  void Check(cublasStatus_t s, absl::string_view where) {
    if (s != CUBLAS_STATUS_SUCCESS) Fail(CublasError(s, where));
  }
  void Check(cudnnStatus_t s, absl::string_view where) {
    if (s != CUDNN_STATUS_SUCCESS) Fail(CudnnError(s, where));
  }
  // After kernel launches: a launch error (bad configuration, no kernel image for this GPU).
  void CheckLaunch(absl::string_view where) { Check(cudaGetLastError(), where); }
  void Fail(absl::Status status);
  // No failure recorded since the last Synchronize or TakeError.
  bool ok() const { return error_.ok(); }

  // Waits for both streams; returns the first error so far (and clears it), including one raised
  // by a kernel while it ran.
  absl::Status Synchronize(absl::string_view where);
  // The first error recorded so far (and clears it), without waiting: what calls recorded while
  // the stream was capturing a graph (nothing ran; see Backend::EndCapture).
  absl::Status TakeError() { return std::exchange(error_, absl::OkStatus()); }

 private:
  Context() = default;
  absl::StatusOr<void*> AllocateBytes(size_t bytes, absl::string_view what);

  int device_ = 0;
  nn::Precision precision_ = nn::Precision::kFp32;
  cudaDeviceProp properties_{};
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  DeviceArray<char> workspace_;
  size_t workspace_bytes_ = 0;
  absl::Status error_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_CONTEXT_H_
