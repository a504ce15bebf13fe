// Launchers of psflow's own CUDA kernels (compiled by nvcc in elementwise.cu; callable from host
// C++). Every launcher queues work on `stream` and returns at once; launch errors surface through
// cudaGetLastError (Context::CheckLaunch). Pointers are device pointers unless named host_*.
// Shapes follow the CPU reference layers (worker/backend/cpu/*), element for element.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_KERNELS_H_
#define PSFLOW_WORKER_BACKEND_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// ---- Gradient clipping by global norm, on the device (no host round trip), as nn/clip.cc.
// *sum_sq = sum of x[i]^2 (double accumulation; *sum_sq is zeroed first, then overwritten).
void LaunchSumOfSquares(const float* x, int64_t n, double* sum_sq, cudaStream_t stream);
// Unscaling and clipping (nn/clip.cc's UnscaleAndClip) once *sum_sq holds the sum of squares of
// the still scaled x: norm = unscale * sqrt(*sum_sq); x *= unscale * (clip_norm / norm when
// clip_norm > 0 and norm > clip_norm, else 1). Untouched when norm is not finite.
void LaunchUnscaleClip(float* x, int64_t n, const double* sum_sq, float unscale, float clip_norm,
                       cudaStream_t stream);
// y = a * y + b * x (towers: the weighted sum of their gradients).
void LaunchAxpby(float a, float* y, float b, const float* x, int64_t n, cudaStream_t stream);

// ---- Elementwise.
// y[r, c] = bias[c] for a [rows, cols] matrix (the start of x * W + b).
void LaunchBroadcastRows(const float* bias, float* y, int64_t rows, int64_t cols,
                         cudaStream_t stream);
// db[c] += sum over rows of dy[r, c] (summed in double; tall matrices in chunks of rows whose
// sums join by atomicAdd).
void LaunchColumnSums(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream);
// kind: 0 sigmoid, 1 relu, 2 tanh (nn::ActivationKind's order).
void LaunchActivationForward(int kind, const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = dy * f'(x) expressed through y = f(x).
void LaunchActivationBackward(int kind, const float* y, const float* dy, float* dx, int64_t n,
                              cudaStream_t stream);
// y = keep(seed, step, i) ? x / keep_prob : 0. The mask is the CPU layer's
// (worker/backend/cpu/dropout.cc) bit for bit: seed is the layer's BuildContext seed, keep() the
// same SplitMix64 hash of (seed, step, i). Forward and Backward of one step use the same mask,
// each step a new one. dx likewise from dy.
// The step is read on the device (*step), so that a recorded launch draws each replay's mask.
void LaunchDropout(const float* x, float* y, int64_t n, float keep_prob, uint64_t seed,
                   const uint64_t* step, cudaStream_t stream);

// ---- Embedding: ids are `count` floats holding integer token ids; table is [vocab, dim].
// y[i, :] = table[ids[i], :]; rows of ids outside [0, vocab) are written as zeros.
void LaunchEmbeddingGather(const float* ids, int64_t count, const float* table, int64_t vocab,
                           int dim, float* y, cudaStream_t stream);
// grad[ids[i], :] += dy[i, :] (atomicAdd: repeated ids add up); ids outside [0, vocab) skipped.
void LaunchEmbeddingScatterAdd(const float* ids, int64_t count, const float* dy, int64_t vocab,
                               int dim, float* grad, cudaStream_t stream);

// ---- Softmax cross-entropy over each row of logits [rows, cols] (one block per row), as
// worker/backend/cpu/softmax_cross_entropy.cc. labels: rows ints in [0, cols) (not checked here).
// row_loss[r] = log(sum_c exp(l[r,c] - max_r)) - (l[r,label] - max_r), summed in double.
// dlogits (nullable) = scale * (softmax - onehot(label)).
// row_correct (nullable)[r] = 1 when the first index of the row's maximum is the label, else 0
// (std::max_element's tie rule).
void LaunchSoftmaxCrossEntropy(const float* logits, int64_t rows, int64_t cols,
                               const int32_t* labels, float scale, float* dlogits, double* row_loss,
                               int32_t* row_correct, cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_KERNELS_H_
