// What every backend's Conv2D, MaxPool, Dense and Embedding check and declare at Build: the
// shapes, TensorFlow's padding rule and the parameters. The backends differ only in how they run
// Forward and Backward (and in what they prepare for that, e.g. cuDNN descriptors).
#ifndef PSFLOW_WORKER_NN_LAYER_BUILD_H_
#define PSFLOW_WORKER_NN_LAYER_BUILD_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"
#include "worker/nn/parameter_set.h"
#include "worker/nn/window_dim.h"

namespace psflow::nn {

// A window sliding over both spatial dimensions of an [height, width, channels] input, each as
// WindowDim.
struct Window2D {
  int64_t in_h = 0, in_w = 0, channels = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0;
};
// INVALID_ARGUMENT starting with `layer` ("conv2d", "maxpool") unless input is [height, width,
// channels] with each >= 1 and WindowDim accepts both dimensions.
absl::StatusOr<Window2D> SlideWindow(absl::string_view layer, const Shape& input, int window,
                                     int stride, Padding padding);

// MaxPool: the window (SlideWindow "maxpool"); also INVALID_ARGUMENT when an example's input has
// more positions than an int32 argmax can name.
absl::StatusOr<Window2D> BuildMaxPool(const MaxPoolSpec& spec, const Shape& input);

// Conv2D: the window, a patch's length (kernel_size^2 * channels), the kernel [k, k, channels,
// filters] and bias [filters] declared as "<name>/kernel" and "<name>/bias", and the output
// [out_h, out_w, filters]. INVALID_ARGUMENT for filters or kernel_size < 1 or a bad window.
struct Conv2DBuild {
  Window2D window;
  int64_t patch = 0;
  ParameterSet::Handle kernel = -1;
  ParameterSet::Handle bias = -1;
  Shape out;
};
absl::StatusOr<Conv2DBuild> BuildConv2D(const Conv2DSpec& spec, absl::string_view name,
                                        const Shape& input, const BuildContext& ctx);

// Dense over the last dimension (applied at every other position): in = input.back(), positions
// = the other dimensions' product, kernel [in, units] and bias [units], output = input with its
// last dimension replaced by units. INVALID_ARGUMENT for units < 1, an input without dimensions
// or an empty last one.
struct DenseBuild {
  int64_t in = 0;
  int64_t positions = 0;
  ParameterSet::Handle kernel = -1;
  ParameterSet::Handle bias = -1;
  Shape out;
};
absl::StatusOr<DenseBuild> BuildDense(const DenseSpec& spec, absl::string_view name,
                                      const Shape& input, const BuildContext& ctx);

// Embedding of [time] token ids: the table [vocab_size, dim] declared as "<name>/embeddings" and
// marked sparse, output [time, dim]. INVALID_ARGUMENT for vocab_size or dim < 1, or an input that
// is not one dimension.
struct EmbeddingBuild {
  int64_t time = 0;
  ParameterSet::Handle table = -1;
  Shape out;
};
absl::StatusOr<EmbeddingBuild> BuildEmbedding(const EmbeddingSpec& spec, absl::string_view name,
                                              const Shape& input, const BuildContext& ctx);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_LAYER_BUILD_H_
