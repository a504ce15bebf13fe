#include "worker/nn/backend.h"

#include <algorithm>
#include <new>

#include "worker/nn/clip.h"

namespace psflow::nn {

absl::StatusOr<double> Backend::FinishGradients(ParameterSet& params, float clip_norm) {
  return clip_norm > 0 ? ClipByGlobalNorm(params, clip_norm) : 0.0;
}

float* Backend::AllocateHostRaw(int64_t floats) {
  return new (std::nothrow) float[static_cast<size_t>(std::max<int64_t>(floats, 1))]();
}

void Backend::FreeHost(float* p) const { delete[] p; }

}  // namespace psflow::nn
