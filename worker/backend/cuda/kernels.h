// Launchers of psflow's own CUDA kernels (compiled by nvcc in *.cu; callable from host C++).
// Every launcher queues work on `stream` and returns at once; launch errors surface through
// cudaGetLastError (Context::CheckLaunch). Pointers are device pointers unless named host_*.
// Shapes follow the CPU reference layers (worker/backend/cpu/*), element for element.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_KERNELS_H_
#define PSFLOW_WORKER_BACKEND_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// ---- Gradient clipping by global norm, on the device (no host round trip).
// *sum_sq = sum of x[i]^2 (double accumulation; *sum_sq is overwritten).
void LaunchSumOfSquares(const float* x, int64_t n, double* sum_sq, cudaStream_t stream);
// x *= clip_norm / sqrt(*sum_sq) when sqrt(*sum_sq) > clip_norm; untouched otherwise.
void LaunchClipScale(float* x, int64_t n, const double* sum_sq, float clip_norm,
                     cudaStream_t stream);

// ---- Elementwise.
// y[r, c] = bias[c] for a [rows, cols] matrix (the start of x * W + b).
void LaunchBroadcastRows(const float* bias, float* y, int64_t rows, int64_t cols,
                         cudaStream_t stream);
// db[c] += sum over rows of dy[r, c].
void LaunchColumnSums(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream);
// kind: 0 sigmoid, 1 relu, 2 tanh (nn::ActivationKind's order).
void LaunchActivationForward(int kind, const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = dy * f'(x) expressed through y = f(x).
void LaunchActivationBackward(int kind, const float* y, const float* dy, float* dx, int64_t n,
                              cudaStream_t stream);
// y = keep(seed, step, i) ? x / keep_prob : 0, with keep() a counter-based hash (the same mask
// for Forward and Backward of one step, a new one each step). dx likewise from dy.
void LaunchDropout(const float* x, float* y, int64_t n, float keep_prob, uint64_t seed,
                   uint64_t step, cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_KERNELS_H_
