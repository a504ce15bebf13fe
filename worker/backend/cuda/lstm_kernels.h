// Launchers of the CUDA LSTM's own kernels (worker/backend/cuda/lstm_kernels.cu), for the layer
// in lstm.h: the fused cell of the hand-written path, and the conversion between TensorFlow's
// parameter layout and cuDNN's weight space for the cuDNN path.
//
// Every launcher queues work on `stream` and returns at once; launch errors surface through
// cudaGetLastError (Context::CheckLaunch). Pointers are device pointers. Layouts follow the CPU
// reference (worker/backend/cpu/lstm.cc): per example, time-major rows; gates as four column
// blocks i, j, f, o of 4 * units columns (TensorFlow's BasicLSTMCell).
#ifndef PSFLOW_WORKER_BACKEND_CUDA_LSTM_KERNELS_H_
#define PSFLOW_WORKER_BACKEND_CUDA_LSTM_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// ---- The fused path: one time step of the cell for `batch` examples. Example b's rows are at
// base + b * stride for every operand (strides in floats), so one launcher serves every step of
// a [batch, time, ...] buffer.

// gates: on entry x W_x + h_{t-1} W_h (no bias); on return the activations sigmoid(i), tanh(j),
// sigmoid(f + forget_bias), sigmoid(o), with bias[4 units] added before the nonlinearities.
// c = c_prev * f + i * j; h = tanh(c) * o.
void LaunchLstmCellForward(float* gates, int64_t gates_stride, const float* bias,
                           const float* c_prev, int64_t c_prev_stride, float* c, float* h,
                           int64_t out_stride, int batch, int units, float forget_bias,
                           cudaStream_t stream);

// gates: on entry the step's activations (as LaunchLstmCellForward left them); on return the
// gradients of the loss with respect to the pre-activations. c, c_prev: the cell states of the
// step and the one before; dy: the output gradient of the step (c and dy share out_stride).
// dh_next, dc_next: [batch, units], on entry the gradients flowing into h_t and c_t from step
// t + 1; on return dc_next holds the gradient into c_{t-1} (dh_next is left for the caller's
// d_gates * W_h^T product to overwrite).
void LaunchLstmCellBackward(float* gates, int64_t gates_stride, const float* c, const float* c_prev,
                            int64_t c_prev_stride, const float* dy, int64_t out_stride,
                            const float* dh_next, float* dc_next, int batch, int units,
                            cudaStream_t stream);

// ---- The cuDNN path. Where each per-gate matrix and bias lives in cuDNN's weight space, in
// floats from its start, indexed by cuDNN's gate order (i, f, g, o). w[g]: [units, in] row-major
// (the input matrix W), r[g]: [units, units] row-major (the recurrent matrix R), b[g]: [units]
// (the single input bias).
struct CudnnLstmWeightLayout {
  int64_t w[4];
  int64_t r[4];
  int64_t b[4];
};

// TensorFlow's kernel [in + units, 4 units] and bias [4 units] -> cuDNN's weight space: each gate
// block transposed, gates reordered (TensorFlow's j is cuDNN's g, f and g swap places), and
// forget_bias added into the f bias. Writes only the places `layout` names.
void LaunchPackLstmWeights(const float* kernel, const float* bias, int in, int units,
                           float forget_bias, const CudnnLstmWeightLayout& layout,
                           float* weight_space, cudaStream_t stream);

// The inverse mapping for gradients: d_kernel += cuDNN's dW / dR (transposed back, gates
// reordered), d_bias += cuDNN's db. The forget bias is a constant: it has no gradient.
void LaunchUnpackLstmGradients(const float* dweight_space, const CudnnLstmWeightLayout& layout,
                               int in, int units, float* d_kernel, float* d_bias,
                               cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_LSTM_KERNELS_H_
