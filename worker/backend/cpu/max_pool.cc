#include "worker/backend/cpu/max_pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "worker/nn/layer_build.h"

namespace psflow::cpu {

absl::StatusOr<nn::Shape> MaxPool::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  absl::StatusOr<nn::Window2D> w = nn::BuildMaxPool(spec_, input);
  if (!w.ok()) return w.status();
  in_h_ = w->in_h;
  in_w_ = w->in_w;
  c_ = w->channels;
  out_h_ = w->out_h;
  out_w_ = w->out_w;
  pad_top_ = w->pad_top;
  pad_left_ = w->pad_left;
  argmax_.assign(static_cast<size_t>(ctx.max_batch * out_h_ * out_w_ * c_), 0);
  return nn::Shape{out_h_, out_w_, c_};
}

void MaxPool::Forward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y) {
  ParallelFor(pool_, x.rows, 1,
              [&](int64_t begin, int64_t end) { ForwardExamples(x, y, begin, end); });
}

void MaxPool::ForwardExamples(const nn::Matrix& x, const nn::Matrix& y, int64_t begin,
                              int64_t end) {
  const int64_t win = spec_.window, s = spec_.stride, c = c_;
  const int64_t per_example = out_h_ * out_w_ * c;
  int32_t* arg = argmax_.data() + begin * per_example;
  float* out = y.data + begin * per_example;
  for (int64_t e = begin; e < end; ++e) {
    const float* xe = x.row(e);
    for (int64_t oh = 0; oh < out_h_; ++oh) {
      const int64_t h0 = oh * s - pad_top_;
      const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + win, in_h_);
      for (int64_t ow = 0; ow < out_w_; ++ow, out += c, arg += c) {
        const int64_t w0 = ow * s - pad_left_;
        const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + win, in_w_);
        // Every window holds an input position (TensorFlow pads less than a window), so the
        // first one seeds the maximum and later ones replace it only when strictly greater.
        const int32_t first = static_cast<int32_t>((h_lo * in_w_ + w_lo) * c);
        for (int64_t i = 0; i < c; ++i) {
          out[i] = xe[first + i];
          arg[i] = first + static_cast<int32_t>(i);
        }
        for (int64_t h = h_lo; h < h_hi; ++h) {
          for (int64_t w = (h == h_lo ? w_lo + 1 : w_lo); w < w_hi; ++w) {
            const int32_t at = static_cast<int32_t>((h * in_w_ + w) * c);
            const float* v = xe + at;
            // Written with a mask, not a branch, so that GCC vectorises it across channels.
            for (int64_t i = 0; i < c; ++i) {
              const float candidate = v[i], best = out[i];
              const int32_t wins = -static_cast<int32_t>(candidate > best);
              out[i] = best < candidate ? candidate : best;
              arg[i] = (arg[i] & ~wins) | ((at + static_cast<int32_t>(i)) & wins);
            }
          }
        }
      }
    }
  }
}

void MaxPool::Backward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& /*y*/,
                       const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx == nullptr) return;
  const int64_t per_example = out_h_ * out_w_ * c_;
  ParallelFor(pool_, x.rows, 1, [&](int64_t begin, int64_t end) {
    std::fill(dx->row(begin), dx->row(begin) + (end - begin) * dx->cols, 0.0f);
    for (int64_t e = begin; e < end; ++e) {
      const int32_t* arg = argmax_.data() + e * per_example;
      const float* g = dy.row(e);
      float* d = dx->row(e);
      for (int64_t i = 0; i < per_example; ++i) d[arg[i]] += g[i];
    }
  });
}

}  // namespace psflow::cpu
