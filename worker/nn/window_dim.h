// TensorFlow's padding rule for one dimension of a sliding window (convolution, pooling): what
// every backend's layers and the model check (worker/models/model_check.h) compute.
#ifndef PSFLOW_WORKER_NN_WINDOW_DIM_H_
#define PSFLOW_WORKER_NN_WINDOW_DIM_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/nn/layer_spec.h"

namespace psflow::nn {

// One spatial dimension of a sliding window under TensorFlow's padding rules: kSame gives
// out = ceil(in / stride) and pads max((out - 1) * stride + window - in, 0) positions, the smaller
// half before; kValid gives out = ceil((in - window + 1) / stride) and pads nothing.
struct WindowedDim {
  int64_t out = 0;
  int64_t pad_before = 0;
};
// INVALID_ARGUMENT when window or stride < 1, or a kValid window is larger than the input.
absl::StatusOr<WindowedDim> WindowDim(int64_t in, int window, int stride, Padding padding);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_WINDOW_DIM_H_
