// The CUDA LSTM's kernels (declared in lstm_kernels.h). Elementwise, grid-stride loops; the cell
// math mirrors worker/backend/cpu/lstm.cc operation for operation (expf/tanhf, no fast math).
#include "worker/backend/cuda/launch.h"
#include "worker/backend/cuda/lstm_kernels.h"

namespace psflow::cuda {
namespace {

__device__ __forceinline__ float Sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// TensorFlow's gate blocks are i, j, f, o; cuDNN's are i, f, g (= j), o. The mapping swaps the
// middle two and is its own inverse.
__device__ __forceinline__ int CudnnGate(int tf_gate) {
  return tf_gate == 1 ? 2 : (tf_gate == 2 ? 1 : tf_gate);
}

__global__ void LstmCellForwardKernel(float* gates, int64_t gates_stride, const float* bias,
                                      const float* c_prev, int64_t c_prev_stride, float* c,
                                      float* h, int64_t out_stride, int batch, int units,
                                      float forget_bias) {
  const int64_t n = static_cast<int64_t>(batch) * units;
  for (int64_t idx = FirstIndex(); idx < n; idx += Stride()) {
    const int64_t b = idx / units;
    const int k = static_cast<int>(idx % units);
    float* g = gates + b * gates_stride;
    const float i = Sigmoid(g[k] + bias[k]);
    const float j = tanhf(g[units + k] + bias[units + k]);
    const float f = Sigmoid(g[2 * units + k] + bias[2 * units + k] + forget_bias);
    const float o = Sigmoid(g[3 * units + k] + bias[3 * units + k]);
    g[k] = i;
    g[units + k] = j;
    g[2 * units + k] = f;
    g[3 * units + k] = o;
    const float cell = c_prev[b * c_prev_stride + k] * f + i * j;
    c[b * out_stride + k] = cell;
    h[b * out_stride + k] = tanhf(cell) * o;
  }
}

__global__ void LstmCellBackwardKernel(float* gates, int64_t gates_stride, const float* c,
                                       const float* c_prev, int64_t c_prev_stride, const float* dy,
                                       int64_t out_stride, const float* dh_next, float* dc_next,
                                       int batch, int units) {
  const int64_t n = static_cast<int64_t>(batch) * units;
  for (int64_t idx = FirstIndex(); idx < n; idx += Stride()) {
    const int64_t b = idx / units;
    const int k = static_cast<int>(idx % units);
    float* g = gates + b * gates_stride;
    const float i = g[k], j = g[units + k], f = g[2 * units + k], o = g[3 * units + k];
    const float tc = tanhf(c[b * out_stride + k]);
    const float dh = dy[b * out_stride + k] + dh_next[idx];
    const float dc = dh * o * (1.0f - tc * tc) + dc_next[idx];
    dc_next[idx] = dc * f;
    g[k] = dc * j * i * (1.0f - i);
    g[units + k] = dc * i * (1.0f - j * j);
    g[2 * units + k] = dc * c_prev[b * c_prev_stride + k] * f * (1.0f - f);
    g[3 * units + k] = dh * tc * o * (1.0f - o);
  }
}

// One thread per element of TensorFlow's kernel [in + units, 4 units] followed by its bias
// [4 units]: reads are coalesced, writes land transposed in cuDNN's per-gate matrices.
__global__ void PackLstmWeightsKernel(const float* kernel, const float* bias, int in, int units,
                                      float forget_bias, CudnnLstmWeightLayout layout,
                                      float* weight_space) {
  const int64_t g4 = 4 * static_cast<int64_t>(units);
  const int64_t kernel_size = (static_cast<int64_t>(in) + units) * g4;
  const int64_t n = kernel_size + g4;
  for (int64_t idx = FirstIndex(); idx < n; idx += Stride()) {
    if (idx < kernel_size) {
      const int64_t row = idx / g4;
      const int col = static_cast<int>(idx % g4);
      const int tf_gate = col / units, k = col % units;
      const int gate = CudnnGate(tf_gate);
      if (row < in) {
        weight_space[layout.w[gate] + static_cast<int64_t>(k) * in + row] = kernel[idx];
      } else {
        weight_space[layout.r[gate] + static_cast<int64_t>(k) * units + (row - in)] = kernel[idx];
      }
    } else {
      const int col = static_cast<int>(idx - kernel_size);
      const int tf_gate = col / units, k = col % units;
      weight_space[layout.b[CudnnGate(tf_gate)] + k] =
          bias[col] + (tf_gate == 2 ? forget_bias : 0.0f);
    }
  }
}

// The same traversal: each TensorFlow-layout gradient element has exactly one thread, so the
// additions need no atomics.
__global__ void UnpackLstmGradientsKernel(const float* dweight_space, CudnnLstmWeightLayout layout,
                                          int in, int units, float* d_kernel, float* d_bias) {
  const int64_t g4 = 4 * static_cast<int64_t>(units);
  const int64_t kernel_size = (static_cast<int64_t>(in) + units) * g4;
  const int64_t n = kernel_size + g4;
  for (int64_t idx = FirstIndex(); idx < n; idx += Stride()) {
    if (idx < kernel_size) {
      const int64_t row = idx / g4;
      const int col = static_cast<int>(idx % g4);
      const int tf_gate = col / units, k = col % units;
      const int gate = CudnnGate(tf_gate);
      d_kernel[idx] +=
          row < in ? dweight_space[layout.w[gate] + static_cast<int64_t>(k) * in + row]
                   : dweight_space[layout.r[gate] + static_cast<int64_t>(k) * units + (row - in)];
    } else {
      const int col = static_cast<int>(idx - kernel_size);
      const int tf_gate = col / units, k = col % units;
      d_bias[col] += dweight_space[layout.b[CudnnGate(tf_gate)] + k];
    }
  }
}

}  // namespace

void LaunchLstmCellForward(float* gates, int64_t gates_stride, const float* bias,
                           const float* c_prev, int64_t c_prev_stride, float* c, float* h,
                           int64_t out_stride, int batch, int units, float forget_bias,
                           cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(batch) * units;
  if (n <= 0) return;
  LstmCellForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(gates, gates_stride, bias, c_prev,
                                                            c_prev_stride, c, h, out_stride, batch,
                                                            units, forget_bias);
}

void LaunchLstmCellBackward(float* gates, int64_t gates_stride, const float* c, const float* c_prev,
                            int64_t c_prev_stride, const float* dy, int64_t out_stride,
                            const float* dh_next, float* dc_next, int batch, int units,
                            cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(batch) * units;
  if (n <= 0) return;
  LstmCellBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(gates, gates_stride, c, c_prev,
                                                             c_prev_stride, dy, out_stride, dh_next,
                                                             dc_next, batch, units);
}

void LaunchPackLstmWeights(const float* kernel, const float* bias, int in, int units,
                           float forget_bias, const CudnnLstmWeightLayout& layout,
                           float* weight_space, cudaStream_t stream) {
  const int64_t n = (static_cast<int64_t>(in) + units + 1) * 4 * units;
  if (n <= 0) return;
  PackLstmWeightsKernel<<<Blocks(n), kThreads, 0, stream>>>(kernel, bias, in, units, forget_bias,
                                                            layout, weight_space);
}

void LaunchUnpackLstmGradients(const float* dweight_space, const CudnnLstmWeightLayout& layout,
                               int in, int units, float* d_kernel, float* d_bias,
                               cudaStream_t stream) {
  const int64_t n = (static_cast<int64_t>(in) + units + 1) * 4 * units;
  if (n <= 0) return;
  UnpackLstmGradientsKernel<<<Blocks(n), kThreads, 0, stream>>>(dweight_space, layout, in, units,
                                                                d_kernel, d_bias);
}

}  // namespace psflow::cuda
