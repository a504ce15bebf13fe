#include "worker/backend/cpu/dropout.h"

#include <cstring>

namespace psflow::cpu {
namespace {

// SplitMix64's finaliser: a well-mixed 64-bit hash of a counter.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

absl::StatusOr<nn::Shape> Dropout::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  if (!(spec_.keep_prob > 0.0f && spec_.keep_prob <= 1.0f)) {
    return absl::InvalidArgumentError("dropout keep_prob must be in (0, 1]");
  }
  seed_ = Mix(ctx.seed);
  return input;
}

void Dropout::ApplyMask(uint64_t step, const float* in, float* out, int64_t n) const {
  // Kept when the top 32 bits of the element's hash fall below keep_prob * 2^32.
  const auto threshold = static_cast<uint64_t>(static_cast<double>(spec_.keep_prob) * 4294967296.0);
  const float scale = 1.0f / spec_.keep_prob;
  const uint64_t base = Mix(seed_ ^ (step * 0x9e3779b97f4a7c15ULL));
  for (int64_t i = 0; i < n; ++i) {
    const bool kept = (Mix(base + static_cast<uint64_t>(i)) >> 32) < threshold;
    out[i] = kept ? in[i] * scale : 0.0f;
  }
}

void Dropout::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  if (ctx.training && spec_.keep_prob < 1.0f) {
    ApplyMask(ctx.step, x.data, y.data, x.size());
  } else {
    std::memcpy(y.data, x.data, static_cast<size_t>(x.size()) * sizeof(float));
  }
}

void Dropout::Backward(const nn::RunContext& ctx, const nn::Matrix&, const nn::Matrix&,
                       const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx == nullptr) return;
  if (spec_.keep_prob < 1.0f) {
    ApplyMask(ctx.step, dy.data, dx->data, dy.size());
  } else {
    std::memcpy(dx->data, dy.data, static_cast<size_t>(dy.size()) * sizeof(float));
  }
}

}  // namespace psflow::cpu
