#include "worker/backend/cpu/lrn.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace psflow::cpu {
namespace {

// out[c] = sum of in[c'] for |c' - c| <= r within [0, n): one vectorisable pass per offset.
void BandSum(const float* in, int64_t n, int64_t r, float* out) {
  std::fill(out, out + n, 0.0f);
  for (int64_t d = -r; d <= r; ++d) {
    const int64_t lo = std::max<int64_t>(0, -d), hi = std::min(n, n - d);
    for (int64_t c = lo; c < hi; ++c) out[c] += in[c + d];
  }
}

// n^-beta, with square roots instead of pow for the betas models use (0.5, 0.75, 1).
float PowNegBeta(float n, float beta) {
  if (beta == 0.5f) return 1.0f / std::sqrt(n);
  if (beta == 0.75f) {
    const float r = 1.0f / std::sqrt(n);
    return r * std::sqrt(r);
  }
  if (beta == 1.0f) return 1.0f / n;
  return std::pow(n, -beta);
}

}  // namespace

absl::StatusOr<nn::Shape> Lrn::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  if (input.empty()) return absl::InvalidArgumentError("lrn needs an input with channels");
  if (spec_.depth_radius < 0) return absl::InvalidArgumentError("lrn depth_radius must be >= 0");
  if (!(spec_.bias > 0) || !(spec_.alpha >= 0)) {
    return absl::InvalidArgumentError("lrn needs bias > 0 and alpha >= 0");
  }
  channels_ = input.back();
  scale_.assign(static_cast<size_t>(ctx.max_batch * nn::NumElements(input)), 0.0f);
  return input;
}

void Lrn::Denominators(const float* x, float* terms, float* n) const {
  const int64_t c = channels_;
  for (int64_t i = 0; i < c; ++i) terms[i] = x[i] * x[i];
  BandSum(terms, c, spec_.depth_radius, n);
  for (int64_t i = 0; i < c; ++i) n[i] = spec_.bias + spec_.alpha * n[i];
}

std::span<float> Lrn::Scratch() const {
  // Per thread, two positions' channels; sized once (no allocation in later steps).
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(2 * channels_)) scratch.resize(2 * channels_);
  return {scratch.data(), static_cast<size_t>(2 * channels_)};
}

void Lrn::ForPositions(int64_t elements,
                       absl::FunctionRef<void(int64_t p, float* terms, float* n)> fn) const {
  const int64_t c = channels_;
  ParallelFor(pool_, elements / c, kPositionsPerRange, [&](int64_t begin, int64_t end) {
    std::span<float> scratch = Scratch();
    for (int64_t p = begin * c; p < end * c; p += c) fn(p, scratch.data(), scratch.data() + c);
  });
}

void Lrn::Forward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y) {
  const int64_t c = channels_;
  ForPositions(x.size(), [&](int64_t p, float* terms, float* n) {
    Denominators(x.data + p, terms, n);
    float* scale = scale_.data() + p;
    for (int64_t i = 0; i < c; ++i) {
      scale[i] = PowNegBeta(n[i], spec_.beta);
      y.data[p + i] = x.data[p + i] * scale[i];
    }
  });
}

void Lrn::Backward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y,
                   const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx == nullptr) return;
  const int64_t c = channels_;
  const float k = -2.0f * spec_.alpha * spec_.beta;
  ForPositions(x.size(), [&](int64_t p, float* terms, float* n) {
    // n is cheap to recompute (a band sum); keeping it would cost another activation buffer.
    Denominators(x.data + p, terms, n);
    const float* g = dy.data + p;
    for (int64_t i = 0; i < c; ++i) terms[i] = g[i] * y.data[p + i] / n[i];
    BandSum(terms, c, spec_.depth_radius, n);
    const float* scale = scale_.data() + p;
    for (int64_t i = 0; i < c; ++i) {
      dx->data[p + i] = g[i] * scale[i] + k * x.data[p + i] * n[i];
    }
  });
}

}  // namespace psflow::cpu
