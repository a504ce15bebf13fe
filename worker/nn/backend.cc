#include "worker/nn/backend.h"

#include <algorithm>

#include "worker/nn/clip.h"

namespace psflow::nn {

absl::StatusOr<double> Backend::FinishGradients(ParameterSet& params, const GradientFinish& f) {
  if (!f.finished()) return 0.0;
  return UnscaleAndClip(params, f.unscale, f.clip_norm, f.measures());
}

absl::StatusOr<double> Backend::ReduceGradients(ParameterSet& into,
                                                std::span<ParameterSet* const> from,
                                                std::span<const float> weights,
                                                const GradientFinish& f) {
  AddWeightedGradients(into, from, weights, reduce_scratch_);
  return FinishGradients(into, f);
}

void Backend::AddLayerGradients(ParameterSet& into, std::span<ParameterSet* const> from,
                                std::span<Backend* const> /*from_backends*/,
                                std::span<const float> weights, int first, int last, int /*mark*/) {
  AddWeightedGradients(into, from, weights, reduce_scratch_, HandleRange{first, last});
}

void Backend::BroadcastParameters(ParameterSet& from, std::span<ParameterSet* const> to,
                                  std::span<Backend* const> /*to_backends*/) {
  const float* values = from.device_values();
  for (ParameterSet* set : to) std::copy_n(values, from.total_size(), set->device_values());
}

}  // namespace psflow::nn
