#include "worker/nn/backend.h"

#include <algorithm>
#include <new>

#include "worker/nn/clip.h"

namespace psflow::nn {

absl::StatusOr<double> Backend::FinishGradients(ParameterSet& params, const GradientFinish& f) {
  if (!f.to_host) return 0.0;
  return UnscaleAndClip(params, f.unscale, f.clip_norm, f.measures());
}

absl::StatusOr<double> Backend::ReduceGradients(ParameterSet& into,
                                                std::span<ParameterSet* const> from,
                                                std::span<const float> weights,
                                                const GradientFinish& f) {
  AddWeightedGradients(into, from, weights, reduce_scratch_);
  return FinishGradients(into, f);
}

float* Backend::AllocateHostRaw(int64_t floats) {
  return new (std::nothrow) float[static_cast<size_t>(std::max<int64_t>(floats, 1))]();
}

void Backend::FreeHost(float* p) const { delete[] p; }

}  // namespace psflow::nn
