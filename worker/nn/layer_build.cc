#include "worker/nn/layer_build.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::nn {

absl::StatusOr<Window2D> SlideWindow(absl::string_view layer, const Shape& input, int window,
                                     int stride, Padding padding) {
  if (input.size() != 3 || *std::min_element(input.begin(), input.end()) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        layer, " needs a [height, width, channels] input, got [", absl::StrJoin(input, ","), "]"));
  }
  Window2D w{.in_h = input[0], .in_w = input[1], .channels = input[2]};
  for (auto [in, out, pad] :
       {std::tuple{w.in_h, &w.out_h, &w.pad_top}, std::tuple{w.in_w, &w.out_w, &w.pad_left}}) {
    absl::StatusOr<WindowedDim> d = WindowDim(in, window, stride, padding);
    if (!d.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(layer, ": ", d.status().message()));
    }
    *out = d->out;
    *pad = d->pad_before;
  }
  return w;
}

absl::StatusOr<Window2D> BuildMaxPool(const MaxPoolSpec& spec, const Shape& input) {
  absl::StatusOr<Window2D> w =
      SlideWindow("maxpool", input, spec.window, spec.stride, spec.padding);
  if (!w.ok()) return w.status();
  if (w->in_h * w->in_w * w->channels > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("maxpool input too large for 32-bit positions");
  }
  return w;
}

absl::StatusOr<Conv2DBuild> BuildConv2D(const Conv2DSpec& spec, absl::string_view name,
                                        const Shape& input, const BuildContext& ctx) {
  if (spec.filters < 1) return absl::InvalidArgumentError("conv2d filters must be >= 1");
  if (spec.kernel_size < 1) return absl::InvalidArgumentError("conv2d kernel_size must be >= 1");
  absl::StatusOr<Window2D> w =
      SlideWindow("conv2d", input, spec.kernel_size, spec.stride, spec.padding);
  if (!w.ok()) return w.status();
  const int64_t k = spec.kernel_size;
  Conv2DBuild b;
  b.window = *w;
  b.patch = k * k * w->channels;
  b.kernel = ctx.params->Declare(absl::StrCat(name, "/kernel"), {k, k, w->channels, spec.filters},
                                 spec.kernel_init);
  b.bias = ctx.params->Declare(absl::StrCat(name, "/bias"), {spec.filters}, spec.bias_init);
  b.out = Shape{w->out_h, w->out_w, spec.filters};
  return b;
}

absl::StatusOr<DenseBuild> BuildDense(const DenseSpec& spec, absl::string_view name,
                                      const Shape& input, const BuildContext& ctx) {
  if (spec.units < 1) return absl::InvalidArgumentError("dense units must be >= 1");
  if (input.empty() || input.back() < 1) {
    return absl::InvalidArgumentError("dense needs an input with a non-empty last dimension");
  }
  DenseBuild b;
  b.in = input.back();
  b.positions = NumElements(input) / b.in;
  b.kernel =
      ctx.params->Declare(absl::StrCat(name, "/kernel"), {b.in, spec.units}, spec.kernel_init);
  b.bias = ctx.params->Declare(absl::StrCat(name, "/bias"), {spec.units}, spec.bias_init);
  b.out = input;
  b.out.back() = spec.units;
  return b;
}

absl::StatusOr<EmbeddingBuild> BuildEmbedding(const EmbeddingSpec& spec, absl::string_view name,
                                              const Shape& input, const BuildContext& ctx) {
  if (spec.vocab_size < 1 || spec.dim < 1) {
    return absl::InvalidArgumentError("embedding vocab_size and dim must be >= 1");
  }
  if (input.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding expects [time] token ids per example, got ", input.size(), " dims"));
  }
  EmbeddingBuild b;
  b.time = input[0];
  b.table = ctx.params->Declare(absl::StrCat(name, "/embeddings"), {spec.vocab_size, spec.dim},
                                spec.init);
  ctx.params->MarkSparse(b.table);
  b.out = Shape{input[0], spec.dim};
  return b;
}

}  // namespace psflow::nn
