// How psflow's elementwise CUDA kernels are launched: grid-stride loops over n elements with
// kThreads threads per block, the grid capped (every kernel loops with the grid's stride).
// Included by the .cu files; the device helpers exist only where nvcc compiles.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_LAUNCH_H_
#define PSFLOW_WORKER_BACKEND_CUDA_LAUNCH_H_

#include <cstdint>

namespace psflow::cuda {

inline constexpr int kThreads = 256;

// Blocks of kThreads covering n elements, at least 1 and at most 65535.
inline int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

#ifdef __CUDACC__
// Grid-stride loop bounds: this thread's first index and the stride.
__device__ __forceinline__ int64_t FirstIndex() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t Stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
#endif

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_LAUNCH_H_
