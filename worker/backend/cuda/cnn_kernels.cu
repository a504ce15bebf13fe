// The CNN layers' own kernels (declared in cnn_kernels.h): filter layout transposes, bias,
// asymmetric padding, max pooling and LRN. Grid-stride loops, one thread per output element;
// the math mirrors worker/backend/cpu/{conv2d,max_pool,lrn}.cc (no fast math), including the
// order of comparisons and of summation where it decides results (pooling ties, LRN bands).
#include <cmath>

#include "worker/backend/cuda/cnn_kernels.h"
#include "worker/backend/cuda/launch.h"

namespace psflow::cuda {
namespace {

// ---- Convolution helpers.

__global__ void HwioToKrscKernel(const float* hwio, int64_t patch, int64_t filters, float* krsc) {
  const int64_t n = patch * filters;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const int64_t f = i / patch, s = i % patch;
    krsc[i] = hwio[s * filters + f];
  }
}

__global__ void AddKrscToHwioKernel(const float* krsc, int64_t patch, int64_t filters,
                                    float* hwio) {
  const int64_t n = patch * filters;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const int64_t s = i / filters, f = i % filters;
    hwio[i] += krsc[f * patch + s];
  }
}

__global__ void AddBiasKernel(const float* bias, int64_t rows, int64_t filters, float* y) {
  const int64_t n = rows * filters;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] += bias[i % filters];
}

// Bias gradient, stage 1: block (32, 8) sums 32 adjacent columns (coalesced reads) over one
// chunk of rows; chunk blockIdx.y's sums go to partials[blockIdx.y, column].
constexpr int kBiasTile = 32;
constexpr int kBiasRows = 8;
constexpr int kBiasChunks = 128;  // enough blocks to fill a GPU for the few columns of a conv

__global__ void BiasPartialsKernel(const float* dy, int64_t rows, int64_t filters,
                                   int64_t rows_per_chunk, float* partials) {
  __shared__ float sums[kBiasRows][kBiasTile + 1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kBiasTile) + threadIdx.x;
  const int64_t begin = blockIdx.y * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float s = 0.0f;
  if (c < filters) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kBiasRows) s += dy[r * filters + c];
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= filters) return;
  float total = 0.0f;
  for (int k = 0; k < kBiasRows; ++k) total += sums[k][threadIdx.x];
  partials[blockIdx.y * filters + c] = total;
}

// Stage 2: the chunks' sums joined in chunk order.
__global__ void BiasJoinKernel(const float* partials, int64_t filters, float* db) {
  for (int64_t c = FirstIndex(); c < filters; c += Stride()) {
    float total = 0.0f;
    for (int k = 0; k < kBiasChunks; ++k) total += partials[k * filters + c];
    db[c] += total;
  }
}

__global__ void PadAfterKernel(const float* x, int64_t n, int64_t h, int64_t w, int64_t c,
                               int extra_h, int extra_w, float* padded) {
  const int64_t ph = h + extra_h, pw = w + extra_w;
  const int64_t count = n * ph * pw * c;
  for (int64_t i = FirstIndex(); i < count; i += Stride()) {
    const int64_t ch = i % c;
    int64_t t = i / c;
    const int64_t col = t % pw;
    t /= pw;
    const int64_t row = t % ph, e = t / ph;
    padded[i] = row < h && col < w ? x[((e * h + row) * w + col) * c + ch] : 0.0f;
  }
}

__global__ void CropAfterKernel(const float* padded, int64_t n, int64_t h, int64_t w, int64_t c,
                                int extra_h, int extra_w, float* x) {
  const int64_t ph = h + extra_h, pw = w + extra_w;
  const int64_t count = n * h * w * c;
  for (int64_t i = FirstIndex(); i < count; i += Stride()) {
    const int64_t ch = i % c;
    int64_t t = i / c;
    const int64_t col = t % w;
    t /= w;
    const int64_t row = t % h, e = t / h;
    x[i] = padded[((e * ph + row) * pw + col) * c + ch];
  }
}

// ---- Max pooling.

__global__ void MaxPoolForwardKernel(const float* x, int64_t n, PoolGeometry g, float* y,
                                     int32_t* argmax) {
  const int64_t c = g.channels;
  const int64_t count = n * g.out_h * g.out_w * c;
  for (int64_t i = FirstIndex(); i < count; i += Stride()) {
    const int64_t ch = i % c;
    int64_t t = i / c;
    const int64_t ow = t % g.out_w;
    t /= g.out_w;
    const int64_t oh = t % g.out_h, e = t / g.out_h;
    const float* xe = x + e * g.in_h * g.in_w * c;
    const int64_t h0 = oh * g.stride - g.pad_top, w0 = ow * g.stride - g.pad_left;
    const int64_t h_lo = h0 > 0 ? h0 : 0, w_lo = w0 > 0 ? w0 : 0;
    const int64_t h_hi = h0 + g.window < g.in_h ? h0 + g.window : g.in_h;
    const int64_t w_hi = w0 + g.window < g.in_w ? w0 + g.window : g.in_w;
    // Every window holds an input position (TensorFlow pads less than a window): the first
    // seeds the maximum; later ones replace it only when strictly greater (a NaN never does).
    int64_t best_at = (h_lo * g.in_w + w_lo) * c + ch;
    float best = xe[best_at];
    for (int64_t h = h_lo; h < h_hi; ++h) {
      for (int64_t w = w_lo; w < w_hi; ++w) {
        const int64_t at = (h * g.in_w + w) * c + ch;
        const float v = xe[at];
        if (v > best) {
          best = v;
          best_at = at;
        }
      }
    }
    y[i] = best;
    argmax[i] = static_cast<int32_t>(best_at);
  }
}

__global__ void MaxPoolBackwardKernel(const float* dy, const int32_t* argmax, int64_t n,
                                      PoolGeometry g, float* dx) {
  const int64_t c = g.channels;
  const int64_t count = n * g.in_h * g.in_w * c;
  for (int64_t i = FirstIndex(); i < count; i += Stride()) {
    const int64_t ch = i % c;
    int64_t t = i / c;
    const int64_t w = t % g.in_w;
    t /= g.in_w;
    const int64_t h = t % g.in_h, e = t / g.in_h;
    // Outputs whose window holds row h: oh * stride - pad_top <= h <= that + window - 1.
    const int64_t th = h + g.pad_top - g.window + 1, tw = w + g.pad_left - g.window + 1;
    const int64_t oh_lo = th <= 0 ? 0 : (th + g.stride - 1) / g.stride;
    const int64_t ow_lo = tw <= 0 ? 0 : (tw + g.stride - 1) / g.stride;
    const int64_t oh_last = (h + g.pad_top) / g.stride, ow_last = (w + g.pad_left) / g.stride;
    const int64_t oh_hi = oh_last < g.out_h - 1 ? oh_last : g.out_h - 1;
    const int64_t ow_hi = ow_last < g.out_w - 1 ? ow_last : g.out_w - 1;
    const auto self = static_cast<int32_t>((h * g.in_w + w) * c + ch);
    float sum = 0.0f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const int64_t o = ((e * g.out_h + oh) * g.out_w + ow) * c + ch;
        if (argmax[o] == self) sum += dy[o];
      }
    }
    dx[i] = sum;
  }
}

// ---- LRN.

// n^-beta as the CPU's PowNegBeta: square roots for the betas models use.
__device__ __forceinline__ float PowNegBeta(float v, float beta) {
  if (beta == 0.5f) return 1.0f / sqrtf(v);
  if (beta == 0.75f) {
    const float r = 1.0f / sqrtf(v);
    return r * sqrtf(r);
  }
  if (beta == 1.0f) return 1.0f / v;
  return powf(v, -beta);
}

// bias + alpha * the band sum of squares around element i (channel ch of a position at base),
// added in ascending channel order as the CPU's BandSum.
__device__ __forceinline__ float Denominator(const float* x, int64_t base, int64_t ch,
                                             const LrnParams& p) {
  const int64_t lo = ch - p.radius > 0 ? ch - p.radius : 0;
  const int64_t hi = ch + p.radius < p.channels - 1 ? ch + p.radius : p.channels - 1;
  float sum = 0.0f;
  for (int64_t j = lo; j <= hi; ++j) {
    const float v = x[base + j];
    sum += v * v;
  }
  return p.bias + p.alpha * sum;
}

__global__ void LrnForwardKernel(const float* x, int64_t count, LrnParams p, float* y,
                                 float* scale) {
  for (int64_t i = FirstIndex(); i < count; i += Stride()) {
    const int64_t ch = i % p.channels;
    const float s = PowNegBeta(Denominator(x, i - ch, ch, p), p.beta);
    scale[i] = s;
    y[i] = x[i] * s;
  }
}

// terms_i = dy_i * y_i / n_i, n recomputed from x (a band sum: cheaper than keeping it).
__global__ void LrnTermsKernel(const float* x, const float* y, const float* dy, int64_t count,
                               LrnParams p, float* terms) {
  for (int64_t i = FirstIndex(); i < count; i += Stride()) {
    const int64_t ch = i % p.channels;
    terms[i] = dy[i] * y[i] / Denominator(x, i - ch, ch, p);
  }
}

// dx_j = dy_j * scale_j + k * x_j * (band sum of terms), k = -2 alpha beta.
__global__ void LrnGradKernel(const float* x, const float* dy, const float* scale,
                              const float* terms, int64_t count, LrnParams p, float k, float* dx) {
  for (int64_t i = FirstIndex(); i < count; i += Stride()) {
    const int64_t ch = i % p.channels, base = i - ch;
    const int64_t lo = ch - p.radius > 0 ? ch - p.radius : 0;
    const int64_t hi = ch + p.radius < p.channels - 1 ? ch + p.radius : p.channels - 1;
    float band = 0.0f;
    for (int64_t j = lo; j <= hi; ++j) band += terms[base + j];
    dx[i] = dy[i] * scale[i] + k * x[i] * band;
  }
}

}  // namespace

void LaunchHwioToKrsc(const float* hwio, int64_t patch, int64_t filters, float* krsc,
                      cudaStream_t stream) {
  HwioToKrscKernel<<<Blocks(patch * filters), kThreads, 0, stream>>>(hwio, patch, filters, krsc);
}

void LaunchAddKrscToHwio(const float* krsc, int64_t patch, int64_t filters, float* hwio,
                         cudaStream_t stream) {
  AddKrscToHwioKernel<<<Blocks(patch * filters), kThreads, 0, stream>>>(krsc, patch, filters, hwio);
}

void LaunchAddBias(const float* bias, int64_t rows, int64_t filters, float* y,
                   cudaStream_t stream) {
  if (rows <= 0 || filters <= 0) return;
  AddBiasKernel<<<Blocks(rows * filters), kThreads, 0, stream>>>(bias, rows, filters, y);
}

int64_t BiasGradPartialFloats(int64_t filters) { return kBiasChunks * filters; }

void LaunchBiasGrad(const float* dy, int64_t rows, int64_t filters, float* partials, float* db,
                    cudaStream_t stream) {
  if (rows <= 0 || filters <= 0) return;
  const int64_t rows_per_chunk = (rows + kBiasChunks - 1) / kBiasChunks;
  const dim3 grid(static_cast<unsigned>((filters + kBiasTile - 1) / kBiasTile), kBiasChunks);
  BiasPartialsKernel<<<grid, dim3(kBiasTile, kBiasRows), 0, stream>>>(dy, rows, filters,
                                                                      rows_per_chunk, partials);
  BiasJoinKernel<<<Blocks(filters), kThreads, 0, stream>>>(partials, filters, db);
}

void LaunchPadAfter(const float* x, int64_t n, int64_t h, int64_t w, int64_t c, int extra_h,
                    int extra_w, float* padded, cudaStream_t stream) {
  const int64_t count = n * (h + extra_h) * (w + extra_w) * c;
  PadAfterKernel<<<Blocks(count), kThreads, 0, stream>>>(x, n, h, w, c, extra_h, extra_w, padded);
}

void LaunchCropAfter(const float* padded, int64_t n, int64_t h, int64_t w, int64_t c, int extra_h,
                     int extra_w, float* x, cudaStream_t stream) {
  CropAfterKernel<<<Blocks(n * h * w * c), kThreads, 0, stream>>>(padded, n, h, w, c, extra_h,
                                                                  extra_w, x);
}

void LaunchMaxPoolForward(const float* x, int64_t n, const PoolGeometry& g, float* y,
                          int32_t* argmax, cudaStream_t stream) {
  const int64_t count = n * g.out_h * g.out_w * g.channels;
  MaxPoolForwardKernel<<<Blocks(count), kThreads, 0, stream>>>(x, n, g, y, argmax);
}

void LaunchMaxPoolBackward(const float* dy, const int32_t* argmax, int64_t n, const PoolGeometry& g,
                           float* dx, cudaStream_t stream) {
  const int64_t count = n * g.in_h * g.in_w * g.channels;
  MaxPoolBackwardKernel<<<Blocks(count), kThreads, 0, stream>>>(dy, argmax, n, g, dx);
}

void LaunchLrnForward(const float* x, int64_t count, const LrnParams& p, float* y, float* scale,
                      cudaStream_t stream) {
  LrnForwardKernel<<<Blocks(count), kThreads, 0, stream>>>(x, count, p, y, scale);
}

void LaunchLrnBackward(const float* x, const float* y, const float* dy, const float* scale,
                       int64_t count, const LrnParams& p, float* terms, float* dx,
                       cudaStream_t stream) {
  // As the CPU: k = -2 alpha beta, in float.
  const float k = -2.0f * p.alpha * p.beta;
  LrnTermsKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, dy, count, p, terms);
  LrnGradKernel<<<Blocks(count), kThreads, 0, stream>>>(x, dy, scale, terms, count, p, k, dx);
}

}  // namespace psflow::cuda
