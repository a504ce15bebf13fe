#include "worker/backend/cpu/conv2d.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/backend/cpu/gemm.h"
#include "worker/backend/cpu/vector_math.h"
#include "worker/nn/layer_build.h"

namespace psflow::cpu {

absl::StatusOr<nn::Shape> Conv2D::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  absl::StatusOr<nn::Conv2DBuild> b = nn::BuildConv2D(spec_, name(), input, ctx);
  if (!b.ok()) return b.status();
  const nn::Window2D& w = b->window;
  in_h_ = w.in_h;
  in_w_ = w.in_w;
  in_c_ = w.channels;
  out_h_ = w.out_h;
  out_w_ = w.out_w;
  pad_top_ = w.pad_top;
  pad_left_ = w.pad_left;
  patch_ = b->patch;
  kernel_ = b->kernel;
  bias_ = b->bias;
  const int64_t col_per_example = out_h_ * out_w_ * patch_;
  chunk_ = std::clamp<int64_t>(workspace_floats_ / col_per_example, 1,
                               std::max<int64_t>(ctx.max_batch, 1));
  col_.assign(static_cast<size_t>(chunk_ * col_per_example), 0.0f);
  col_source_ = nullptr;
  return b->out;
}

template <class Visit>
void Conv2D::ForEachKernelRow(Visit visit) const {
  const int64_t k = spec_.kernel_size, s = spec_.stride, c = in_c_;
  const int64_t krow = k * c;  // one kernel row of a patch: k positions of c channels
  int64_t at = 0;
  for (int64_t oh = 0; oh < out_h_; ++oh) {
    const int64_t ih0 = oh * s - pad_top_;
    for (int64_t ow = 0; ow < out_w_; ++ow) {
      const int64_t iw0 = ow * s - pad_left_;
      // A patch's kernel row reads input positions iw0 .. iw0 + k - 1 of one input row: in
      // NHWC those are contiguous, so it is one run between padding on either side.
      const int64_t lo = std::max<int64_t>(0, -iw0) * c;
      const int64_t hi = std::min<int64_t>(k, in_w_ - iw0) * c;
      for (int64_t kh = 0; kh < k; ++kh, at += krow) {
        const int64_t ih = ih0 + kh;
        if (ih < 0 || ih >= in_h_ || hi <= lo) {
          visit(at, int64_t{-1}, lo, hi);
        } else {
          // Indices, not pointers, may point before the row: iw0 is negative in the padding.
          visit(at, (ih * in_w_ + iw0) * c + lo, lo, hi);
        }
      }
    }
  }
}

void Conv2D::Im2ColExample(const float* xe, float* rows) const {
  const int64_t krow = spec_.kernel_size * in_c_;
  ForEachKernelRow([&](int64_t at, int64_t in, int64_t lo, int64_t hi) {
    float* dst = rows + at;
    if (in < 0) {
      std::fill(dst, dst + krow, 0.0f);
      return;
    }
    const float* src = xe + in;
    for (int64_t i = 0; i < lo; ++i) dst[i] = 0.0f;
    for (int64_t i = 0; i < hi - lo; ++i) dst[lo + i] = src[i];
    for (int64_t i = hi; i < krow; ++i) dst[i] = 0.0f;
  });
}

void Conv2D::Col2ImExample(const float* rows, float* dxe) const {
  std::fill(dxe, dxe + in_h_ * in_w_ * in_c_, 0.0f);
  ForEachKernelRow([&](int64_t at, int64_t in, int64_t lo, int64_t hi) {
    if (in < 0) return;
    const float* src = rows + at + lo;
    float* dst = dxe + in;
    for (int64_t i = 0; i < hi - lo; ++i) dst[i] += src[i];
  });
}

void Conv2D::Im2Col(const float* x, int64_t n) {
  const int64_t image = in_h_ * in_w_ * in_c_, rows = out_h_ * out_w_ * patch_;
  ParallelFor(pool_, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) Im2ColExample(x + e * image, col_.data() + e * rows);
  });
}

void Conv2D::Col2Im(int64_t n, float* dx) {
  const int64_t image = in_h_ * in_w_ * in_c_, rows = out_h_ * out_w_ * patch_;
  ParallelFor(pool_, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) Col2ImExample(col_.data() + e * rows, dx + e * image);
  });
}

void Conv2D::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  const float* w = ctx.params->value(kernel_).data();
  const float* b = ctx.params->value(bias_).data();
  const int64_t f = spec_.filters;
  for (int64_t b0 = 0; b0 < x.rows; b0 += chunk_) {
    const int64_t n = std::min(chunk_, x.rows - b0);
    Im2Col(x.row(b0), n);
    col_source_ = x.row(b0);
    // y = broadcast(b); y += patches * W. The chunk's outputs are contiguous rows of y.
    const int64_t m = n * out_h_ * out_w_;
    float* yb = y.row(b0);
    for (int64_t r = 0; r < m; ++r) std::copy(b, b + f, yb + r * f);
    Gemm(pool_, blas::kNoTrans, blas::kNoTrans, static_cast<int>(m), static_cast<int>(f),
         static_cast<int>(patch_), 1.0f, col_.data(), static_cast<int>(patch_), w,
         static_cast<int>(f), 1.0f, yb, static_cast<int>(f));
  }
}

void Conv2D::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& /*y*/,
                      const nn::Matrix& dy, const nn::Matrix* dx) {
  const float* w = ctx.params->value(kernel_).data();
  float* dw = ctx.params->grad(kernel_).data();
  float* db = ctx.params->grad(bias_).data();
  const int64_t f = spec_.filters;
  const int64_t positions = out_h_ * out_w_;
  AddColumnSums(dy.data, dy.rows * positions, f, db);
  // Last chunk first: Forward left its patches in col_.
  for (int64_t b0 = (x.rows - 1) / chunk_ * chunk_; b0 >= 0; b0 -= chunk_) {
    const int64_t n = std::min(chunk_, x.rows - b0);
    if (col_source_ != x.row(b0)) Im2Col(x.row(b0), n);
    col_source_ = nullptr;
    const int m = static_cast<int>(n * positions);
    const float* g = dy.row(b0);
    // dW += patches^T * dy   [patch, f]
    Gemm(pool_, blas::kTrans, blas::kNoTrans, static_cast<int>(patch_), static_cast<int>(f), m,
         1.0f, col_.data(), static_cast<int>(patch_), g, static_cast<int>(f), 1.0f, dw,
         static_cast<int>(f));
    if (dx == nullptr) continue;
    // Patch-row gradients dy * W^T   [m, patch], in place of the patches, then onto dx.
    Gemm(pool_, blas::kNoTrans, blas::kTrans, m, static_cast<int>(patch_), static_cast<int>(f),
         1.0f, g, static_cast<int>(f), w, static_cast<int>(f), 0.0f, col_.data(),
         static_cast<int>(patch_));
    Col2Im(n, dx->row(b0));
  }
}

}  // namespace psflow::cpu
