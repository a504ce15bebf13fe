#include "worker/nn/window_dim.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psflow::nn {

absl::StatusOr<WindowedDim> WindowDim(int64_t in, int window, int stride, Padding padding) {
  if (window < 1) return absl::InvalidArgumentError("window size must be >= 1");
  if (stride < 1) return absl::InvalidArgumentError("stride must be >= 1");
  if (padding == Padding::kValid) {
    if (window > in) {
      return absl::InvalidArgumentError(
          absl::StrCat("a VALID window of ", window, " does not fit in an input of ", in));
    }
    return WindowedDim{(in - window) / stride + 1, 0};
  }
  const int64_t out = (in + stride - 1) / stride;
  const int64_t pad_total = std::max<int64_t>((out - 1) * stride + window - in, 0);
  return WindowedDim{out, pad_total / 2};
}

}  // namespace psflow::nn
