#include "worker/nn/backend.h"

#include "worker/nn/clip.h"

namespace psflow::nn {

absl::StatusOr<double> Backend::FinishGradients(ParameterSet& params, float clip_norm) {
  return clip_norm > 0 ? ClipByGlobalNorm(params, clip_norm) : 0.0;
}

}  // namespace psflow::nn
