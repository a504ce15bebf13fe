// psflow's own CUDA kernels (declared in kernels.h): gradient clipping, the elementwise layers,
// the embedding and the softmax cross-entropy. The math mirrors the CPU reference layers
// (worker/backend/cpu/*) operation for operation (expf/tanhf, no fast math); reductions
// accumulate in double where the CPU does, so only the order of summation differs.
#include <cmath>

#include "worker/backend/cuda/kernels.h"
#include "worker/backend/cuda/launch.h"

namespace psflow::cuda {
namespace {

// ---- Block reductions (blockDim.x a multiple of 32, at most 1024): every thread gets the
// result. `shared` holds one value per warp; the leading barrier lets consecutive reductions
// reuse it.
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct MinOp {
  __device__ long long operator()(long long a, long long b) const { return a < b ? a : b; }
};

template <class T, class Op>
__device__ T BlockReduce(T v, Op op, T* shared) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  T result = shared[0];
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int w = 1; w < warps; ++w) result = op(result, shared[w]);
  return result;
}

// ---- Clipping.
constexpr int kMaxReduceBlocks = 1024;  // few atomics on the one accumulator

__global__ void SumOfSquaresKernel(const float* x, int64_t n, double* sum_sq) {
  __shared__ double partial[32];
  double s = 0;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) s += static_cast<double>(x[i]) * x[i];
  s = BlockReduce(s, SumOp(), partial);
  if (threadIdx.x == 0) atomicAdd(sum_sq, s);
}

__global__ void UnscaleClipKernel(float* x, int64_t n, const double* sum_sq, float unscale,
                                  float clip_norm) {
  const double norm = unscale * sqrt(*sum_sq);
  if (!isfinite(norm)) return;
  double factor = unscale;
  if (clip_norm > 0 && norm > clip_norm) factor *= clip_norm / norm;
  if (factor == 1.0) return;
  const float f = static_cast<float>(factor);
  for (int64_t i = FirstIndex(); i < n; i += Stride()) x[i] *= f;
}

__global__ void AxpbyKernel(float a, float* y, float b, const float* x, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = a * y[i] + b * x[i];
}

// ---- Elementwise.
__global__ void BroadcastRowsKernel(const float* bias, float* y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = bias[i % cols];
}

// Block (32, 8): 32 adjacent columns (coalesced reads), 8 rows at a time; gridDim.y splits the
// rows of tall matrices (atomics then join the chunks).
constexpr int kColumnTile = 32;
constexpr int kColumnRows = 8;

__global__ void ColumnSumsKernel(const float* dy, float* db, int64_t rows, int64_t cols,
                                 int64_t rows_per_chunk) {
  __shared__ double partial[kColumnRows][kColumnTile + 1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kColumnTile) + threadIdx.x;
  const int64_t begin = blockIdx.y * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  double s = 0;
  if (c < cols) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnRows) s += dy[r * cols + c];
  }
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  double total = 0;
  for (int k = 0; k < kColumnRows; ++k) total += partial[k][threadIdx.x];
  if (gridDim.y == 1) {
    db[c] += static_cast<float>(total);
  } else {
    atomicAdd(db + c, static_cast<float>(total));
  }
}

__device__ __forceinline__ float Sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

__global__ void ActivationForwardKernel(int kind, const float* x, float* y, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const float v = x[i];
    y[i] = kind == 0 ? Sigmoid(v) : (kind == 1 ? (v > 0.0f ? v : 0.0f) : tanhf(v));
  }
}

__global__ void ActivationBackwardKernel(int kind, const float* y, const float* dy, float* dx,
                                         int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const float out = y[i], g = dy[i];
    dx[i] = kind == 0 ? g * out * (1.0f - out)
                      : (kind == 1 ? (out > 0.0f ? g : 0.0f) : g * (1.0f - out * out));
  }
}

// SplitMix64's finaliser, as worker/backend/cpu/dropout.cc's Mix.
__host__ __device__ __forceinline__ uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__global__ void DropoutKernel(const float* x, float* y, int64_t n, uint64_t mixed_seed,
                              const uint64_t* step, uint64_t threshold, float scale) {
  const uint64_t base = Mix(mixed_seed ^ (*step * 0x9e3779b97f4a7c15ULL));
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const bool kept = (Mix(base + static_cast<uint64_t>(i)) >> 32) < threshold;
    y[i] = kept ? x[i] * scale : 0.0f;
  }
}

// ---- Embedding.
__global__ void EmbeddingGatherKernel(const float* ids, int64_t count, const float* table,
                                      int64_t vocab, int dim, float* y) {
  const int64_t n = count * dim;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const auto id = static_cast<int64_t>(ids[i / dim]);
    y[i] = id >= 0 && id < vocab ? table[id * dim + i % dim] : 0.0f;
  }
}

__global__ void EmbeddingScatterAddKernel(const float* ids, int64_t count, const float* dy,
                                          int64_t vocab, int dim, float* grad) {
  const int64_t n = count * dim;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const auto id = static_cast<int64_t>(ids[i / dim]);
    if (id >= 0 && id < vocab) atomicAdd(grad + id * dim + i % dim, dy[i]);
  }
}

// ---- Softmax cross-entropy: one block per row (a grid-stride loop over rows), three passes
// over the row (maximum; sum of exponentials; gradient), as the CPU's RowLoss.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, int64_t rows, int64_t cols,
                                          const int32_t* labels, float scale, float* dlogits,
                                          double* row_loss, int32_t* row_correct) {
  __shared__ float max_shared[32];
  __shared__ double sum_shared[32];
  __shared__ long long index_shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * cols;
    const int32_t label = labels[r];
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    m = BlockReduce(m, MaxOp(), max_shared);
    double s = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
    s = BlockReduce(s, SumOp(), sum_shared);
    if (dlogits != nullptr) {
      const float factor = static_cast<float>(scale / s);
      float* out = dlogits + r * cols;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float p = expf(row[c] - m) * factor;
        out[c] = c == label ? p - scale : p;
      }
    }
    if (row_correct != nullptr) {
      // The first index holding the maximum (each thread's candidates rise, so its first hit).
      long long first = cols;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        if (row[c] == m) {
          first = c;
          break;
        }
      }
      first = BlockReduce(first, MinOp(), index_shared);
      if (threadIdx.x == 0) row_correct[r] = first == label ? 1 : 0;
    }
    if (threadIdx.x == 0) row_loss[r] = log(s) - static_cast<double>(row[label] - m);
  }
}

}  // namespace

void LaunchSumOfSquares(const float* x, int64_t n, double* sum_sq, cudaStream_t stream) {
  // A failed memset is reported by cudaGetLastError, as a failed launch would be.
  if (cudaMemsetAsync(sum_sq, 0, sizeof(double), stream) != cudaSuccess) return;
  const int blocks = Blocks(n) < kMaxReduceBlocks ? Blocks(n) : kMaxReduceBlocks;
  SumOfSquaresKernel<<<blocks, kThreads, 0, stream>>>(x, n, sum_sq);
}

void LaunchUnscaleClip(float* x, int64_t n, const double* sum_sq, float unscale, float clip_norm,
                       cudaStream_t stream) {
  UnscaleClipKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, sum_sq, unscale, clip_norm);
}

void LaunchAxpby(float a, float* y, float b, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  AxpbyKernel<<<Blocks(n), kThreads, 0, stream>>>(a, y, b, x, n);
}

void LaunchBroadcastRows(const float* bias, float* y, int64_t rows, int64_t cols,
                         cudaStream_t stream) {
  BroadcastRowsKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(bias, y, rows, cols);
}

void LaunchColumnSums(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t column_blocks = (cols + kColumnTile - 1) / kColumnTile;
  // Enough blocks to fill the GPU for tall, narrow matrices (a convolution's bias: rows are
  // batch * height * width); at least 256 rows per chunk.
  int64_t chunks = (rows + 255) / 256;
  const int64_t wanted = column_blocks >= 512 ? 1 : 512 / column_blocks;
  if (chunks > wanted) chunks = wanted;
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks));
  ColumnSumsKernel<<<grid, dim3(kColumnTile, kColumnRows), 0, stream>>>(dy, db, rows, cols,
                                                                        rows_per_chunk);
}

void LaunchActivationForward(int kind, const float* x, float* y, int64_t n, cudaStream_t stream) {
  ActivationForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(kind, x, y, n);
}

void LaunchActivationBackward(int kind, const float* y, const float* dy, float* dx, int64_t n,
                              cudaStream_t stream) {
  ActivationBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(kind, y, dy, dx, n);
}

void LaunchDropout(const float* x, float* y, int64_t n, float keep_prob, uint64_t seed,
                   const uint64_t* step, cudaStream_t stream) {
  // As the CPU layer: its seed_ is Mix(seed), the step's base Mix(seed_ ^ step * golden); kept
  // when the top 32 bits of the element's hash fall below keep_prob * 2^32.
  const auto threshold = static_cast<uint64_t>(static_cast<double>(keep_prob) * 4294967296.0);
  DropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n, Mix(seed), step, threshold,
                                                    1.0f / keep_prob);
}

void LaunchEmbeddingGather(const float* ids, int64_t count, const float* table, int64_t vocab,
                           int dim, float* y, cudaStream_t stream) {
  EmbeddingGatherKernel<<<Blocks(count * dim), kThreads, 0, stream>>>(ids, count, table, vocab, dim,
                                                                      y);
}

void LaunchEmbeddingScatterAdd(const float* ids, int64_t count, const float* dy, int64_t vocab,
                               int dim, float* grad, cudaStream_t stream) {
  EmbeddingScatterAddKernel<<<Blocks(count * dim), kThreads, 0, stream>>>(ids, count, dy, vocab,
                                                                          dim, grad);
}

void LaunchSoftmaxCrossEntropy(const float* logits, int64_t rows, int64_t cols,
                               const int32_t* labels, float scale, float* dlogits, double* row_loss,
                               int32_t* row_correct, cudaStream_t stream) {
  if (rows <= 0) return;
  const int blocks = static_cast<int>(rows < 65535 ? rows : 65535);
  SoftmaxCrossEntropyKernel<<<blocks, kThreads, 0, stream>>>(logits, rows, cols, labels, scale,
                                                             dlogits, row_loss, row_correct);
}

}  // namespace psflow::cuda
