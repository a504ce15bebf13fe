// Launchers of the CNN layers' own CUDA kernels (worker/backend/cuda/cnn_kernels.cu), for
// conv2d.h, max_pool.h and lrn.h. Images are NHWC per example, as the CPU reference layers
// (worker/backend/cpu/conv2d.cc, max_pool.cc, lrn.cc), whose arithmetic the kernels mirror.
//
// Every launcher queues work on `stream` and returns at once; launch errors surface through
// cudaGetLastError (Context::CheckLaunch). Pointers are device pointers.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_CNN_KERNELS_H_
#define PSFLOW_WORKER_BACKEND_CUDA_CNN_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

// ---- Convolution helpers.

// A TensorFlow kernel [k, k, c, filters] (HWIO) is a row-major [patch, filters] matrix with
// patch = k * k * c; cuDNN's NHWC filter format (KRSC, [filters, k, k, c]) is its transpose.
// krsc = hwio^T.
void LaunchHwioToKrsc(const float* hwio, int64_t patch, int64_t filters, float* krsc,
                      cudaStream_t stream);
// hwio += krsc^T: a filter gradient computed in cuDNN's layout added to TensorFlow's.
void LaunchAddKrscToHwio(const float* krsc, int64_t patch, int64_t filters, float* hwio,
                         cudaStream_t stream);

// y[r, f] += bias[f] for a row-major [rows, filters] matrix (NHWC outputs: rows = n * h * w).
void LaunchAddBias(const float* bias, int64_t rows, int64_t filters, float* y, cudaStream_t stream);
// db[f] += sum over rows of dy[r, f], deterministically: fixed row chunks summed into
// `partials` (BiasGradPartialFloats(filters) floats of scratch), then joined in a fixed order.
int64_t BiasGradPartialFloats(int64_t filters);
void LaunchBiasGrad(const float* dy, int64_t rows, int64_t filters, float* partials, float* db,
                    cudaStream_t stream);

// NHWC images [n, h, w, c] <-> [n, h + extra_h, w + extra_w, c] with zero rows/columns after
// the image: the one extra padding position TensorFlow's SAME puts after (bottom/right) when
// the total is odd, which cuDNN's symmetric padding cannot express.
void LaunchPadAfter(const float* x, int64_t n, int64_t h, int64_t w, int64_t c, int extra_h,
                    int extra_w, float* padded, cudaStream_t stream);
// x = the [h, w] top-left part of each padded image (the inverse of LaunchPadAfter's layout).
void LaunchCropAfter(const float* padded, int64_t n, int64_t h, int64_t w, int64_t c, int extra_h,
                     int extra_w, float* x, cudaStream_t stream);

// ---- Max pooling (tf.nn.max_pool, NHWC).
struct PoolGeometry {
  int64_t in_h = 0, in_w = 0, channels = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0;  // TensorFlow's padding before; positions there never win
  int64_t window = 1, stride = 1;
};
// y = the maximum of each window and channel; argmax = the winner's index within its
// example's input ((h * in_w + w) * channels + c): the first maximum in row-major window order,
// later positions replacing it only when strictly greater (as the CPU layer).
void LaunchMaxPoolForward(const float* x, int64_t n, const PoolGeometry& g, float* y,
                          int32_t* argmax, cudaStream_t stream);
// dx (written, every element) = for each input position, the sum of dy over the outputs whose
// argmax is that position, added in row-major output order: a gather, deterministic and in the
// CPU's order of summation even where windows overlap.
void LaunchMaxPoolBackward(const float* dy, const int32_t* argmax, int64_t n, const PoolGeometry& g,
                           float* dx, cudaStream_t stream);

// ---- Local response normalisation across the last dimension (tf.nn.lrn).
struct LrnParams {
  int64_t channels = 1;
  int64_t radius = 0;
  float bias = 1, alpha = 1, beta = 0.5f;
};
// For `count` elements (a multiple of channels): n_c = bias + alpha * sum_{|c'-c| <= radius}
// x_c'^2 (clipped to existing channels), scale = n^-beta, y = x * scale.
void LaunchLrnForward(const float* x, int64_t count, const LrnParams& p, float* y, float* scale,
                      cudaStream_t stream);
// TensorFlow's LRNGrad: terms_i = dy_i * y_i / n_i (scratch, `count` floats), then
// dx_j = dy_j * scale_j - 2 alpha beta x_j sum_{|i-j| <= radius} terms_i.
void LaunchLrnBackward(const float* x, const float* y, const float* dy, const float* scale,
                       int64_t count, const LrnParams& p, float* terms, float* dx,
                       cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_CNN_KERNELS_H_
