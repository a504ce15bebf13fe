#include "worker/models/model_check.h"

#include <initializer_list>
#include <limits>
#include <set>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/nn/window_dim.h"

namespace psflow::models {
namespace {

const char* PaddingName(nn::Padding p) { return p == nn::Padding::kSame ? "same" : "valid"; }

// Sizes psflow holds: values per example in any layer's input or output, and parameters per
// layer and in all (2^36 floats: 256 GiB). Within them no count below overflows int64.
constexpr int64_t kMaxValuesPerExample = int64_t{1} << 31;
constexpr int64_t kMaxParameters = int64_t{1} << 36;
constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

// The product (or sum) of non-negative counts, kSaturated where it would overflow.
int64_t Product(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(p, f, &p)) return kSaturated;
  }
  return p;
}
int64_t Sum(int64_t a, int64_t b) {
  int64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? kSaturated : s;
}

// The output of a window of `window` x `window` over an [h, w, c] input, or why there is none.
// `noun`: what slides ("kernel", "window").
absl::StatusOr<nn::Shape> Slide(const char* noun, const nn::Shape& in, int window, int stride,
                                nn::Padding padding, int64_t out_channels, std::string& detail) {
  if (in.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "takes [height, width, channels] images, but its input is ", ShapeText(in),
        in.size() == 1 ? " (give the model's input as [height, width, channels])" : ""));
  }
  if (window < 1) return absl::InvalidArgumentError(absl::StrCat("size ", window, " is not >= 1"));
  if (stride < 1) {
    return absl::InvalidArgumentError(absl::StrCat("stride ", stride, " is not >= 1"));
  }
  detail = absl::StrFormat("%s %dx%d, stride %d, padding %s", noun, window, window, stride,
                           PaddingName(padding));
  nn::Shape out = {0, 0, out_channels};
  for (int d = 0; d < 2; ++d) {
    absl::StatusOr<nn::WindowedDim> w = nn::WindowDim(in[d], window, stride, padding);
    if (!w.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("input %s, %s leaves nothing (padding valid needs at least %dx%d)",
                          ShapeText(in), detail, window, window));
    }
    out[d] = w->out;
  }
  return out;
}

// What layer `spec` makes of `in`; sets detail and parameters.
struct Walk {
  bool first = false;
  bool token_inputs = false;
  std::string detail;
  int64_t parameters = 0;

  absl::StatusOr<nn::Shape> operator()(const nn::DenseSpec& s, const nn::Shape& in) {
    if (s.units < 1) return absl::InvalidArgumentError(absl::StrCat("units ", s.units, " < 1"));
    if (in.empty() || in.back() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("needs an input with a last dimension, got ", ShapeText(in)));
    }
    if (in.size() > 1) {
      detail = absl::StrCat("at each of ", nn::NumElements(in) / in.back(), " positions");
    }
    if (s.weight_decay > 0) {
      absl::StrAppend(&detail, detail.empty() ? "" : ", ",
                      absl::StrFormat("weight_decay %g", s.weight_decay));
    }
    parameters = Sum(Product({in.back(), s.units}), s.units);
    nn::Shape out = in;
    out.back() = s.units;
    return out;
  }
  absl::StatusOr<nn::Shape> operator()(const nn::ActivationSpec&, const nn::Shape& in) {
    return in;  // the label names the function
  }
  absl::StatusOr<nn::Shape> operator()(const nn::Conv2DSpec& s, const nn::Shape& in) {
    if (s.filters < 1) {
      return absl::InvalidArgumentError(absl::StrCat("filters ", s.filters, " < 1"));
    }
    absl::StatusOr<nn::Shape> out =
        Slide("kernel", in, s.kernel_size, s.stride, s.padding, s.filters, detail);
    if (!out.ok()) return out;
    absl::StrAppend(&detail, ", ", s.filters, " filters");
    parameters = Sum(Product({s.kernel_size, s.kernel_size, in[2], s.filters}), s.filters);
    return out;
  }
  absl::StatusOr<nn::Shape> operator()(const nn::MaxPoolSpec& s, const nn::Shape& in) {
    return Slide("window", in, s.window, s.stride, s.padding, in.size() == 3 ? in[2] : 0, detail);
  }
  absl::StatusOr<nn::Shape> operator()(const nn::LrnSpec& s, const nn::Shape& in) {
    if (in.size() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "normalises across the channels of [height, width, channels], but its input is ",
          ShapeText(in)));
    }
    if (s.depth_radius < 0) {
      return absl::InvalidArgumentError(absl::StrCat("depth_radius ", s.depth_radius, " < 0"));
    }
    detail = absl::StrFormat("depth_radius %d, bias %g, alpha %g, beta %g", s.depth_radius, s.bias,
                             s.alpha, s.beta);
    return in;
  }
  absl::StatusOr<nn::Shape> operator()(const nn::FlattenSpec&, const nn::Shape& in) {
    return nn::Shape{nn::NumElements(in)};
  }
  absl::StatusOr<nn::Shape> operator()(const nn::DropoutSpec& s, const nn::Shape& in) {
    if (!(s.keep_prob > 0 && s.keep_prob <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("keep_prob %g is not in (0, 1]", s.keep_prob));
    }
    detail = absl::StrFormat("keep_prob %g", s.keep_prob);
    return in;
  }
  absl::StatusOr<nn::Shape> operator()(const nn::EmbeddingSpec& s, const nn::Shape& in) {
    if (!first || !token_inputs) {
      return absl::InvalidArgumentError(
          "reads token ids: it must be layer 0 of a model whose input type is token_ids");
    }
    if (in.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("reads a sequence of token ids, but its input is ", ShapeText(in)));
    }
    if (s.vocab_size < 1 || s.dim < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocab_size ", s.vocab_size, " and dim ", s.dim, " must both be >= 1"));
    }
    detail = absl::StrCat(s.vocab_size, " tokens x ", s.dim);
    parameters = Product({s.vocab_size, s.dim});
    return nn::Shape{in[0], s.dim};
  }
  absl::StatusOr<nn::Shape> operator()(const nn::LstmSpec& s, const nn::Shape& in) {
    if (s.units < 1) return absl::InvalidArgumentError(absl::StrCat("units ", s.units, " < 1"));
    if (in.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("runs over a sequence [time, features], but its input is ", ShapeText(in)));
    }
    detail = absl::StrFormat("%d -> %d over %d steps, forget_bias %g", in[1], s.units, in[0],
                             s.forget_bias);
    parameters = Sum(Product({Sum(in[1], s.units), 4, s.units}), Product({4, s.units}));
    return nn::Shape{in[0], s.units};
  }
};

}  // namespace

std::string ShapeText(const nn::Shape& shape) {
  return shape.empty() ? "scalar" : absl::StrJoin(shape, "x");
}

std::string LayerType(const nn::LayerSpec& layer) {
  if (const auto* a = std::get_if<nn::ActivationSpec>(&layer)) {
    return nn::ActivationKindName(a->kind);
  }
  if (std::holds_alternative<nn::MaxPoolSpec>(layer)) return "max_pool";
  return nn::LayerKindName(layer);
}

std::string LayerLabel(const nn::ModelSpec& spec, size_t i) {
  return absl::StrCat("layer ", i, " (", LayerType(spec.layers[i]), " \"", spec.LayerName(i),
                      "\")");
}

absl::StatusOr<std::vector<LayerReport>> CheckModel(const nn::ModelSpec& spec, bool token_inputs) {
  if (spec.input_shape.empty()) {
    return absl::InvalidArgumentError("input: shape has no dimensions");
  }
  for (int64_t d : spec.input_shape) {
    if (d < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input: shape ", absl::StrJoin(spec.input_shape, "x"), " has a dimension < 1"));
    }
  }
  if (nn::NumElements(spec.input_shape) > kMaxValuesPerExample) {
    return absl::InvalidArgumentError(
        absl::StrCat("input: shape ", absl::StrJoin(spec.input_shape, "x"), " holds more than ",
                     kMaxValuesPerExample, " values per example"));
  }
  if (spec.num_classes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("classes ", spec.num_classes, " < 1"));
  }
  if (spec.layers.empty()) return absl::InvalidArgumentError("layers: the model has none");
  if (token_inputs && !std::holds_alternative<nn::EmbeddingSpec>(spec.layers[0])) {
    return absl::InvalidArgumentError(
        "input type token_ids needs an embedding as layer 0 to read the ids");
  }
  std::vector<LayerReport> reports;
  std::set<std::string> names;
  nn::Shape shape = spec.input_shape;
  int64_t total_parameters = 0;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    LayerReport r;
    r.label = LayerLabel(spec, i);
    r.input = shape;
    if (!names.insert(spec.LayerName(i)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.label, ": another layer before it has the name \"", spec.LayerName(i),
                       "\" (names must be unique: they name the parameters)"));
    }
    Walk walk;
    walk.first = i == 0;
    walk.token_inputs = token_inputs;
    absl::StatusOr<nn::Shape> out =
        std::visit([&](const auto& layer) { return walk(layer, shape); }, spec.layers[i]);
    if (!out.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.label, ": ", out.status().message(),
          i == 0 ? "" : absl::StrCat(" (the output of ", LayerLabel(spec, i - 1), ")")));
    }
    if (nn::NumElements(*out) > kMaxValuesPerExample) {
      return absl::InvalidArgumentError(absl::StrCat(r.label, ": its output ", ShapeText(*out),
                                                     " holds more than ", kMaxValuesPerExample,
                                                     " values per example"));
    }
    total_parameters = Sum(total_parameters, walk.parameters);
    if (total_parameters > kMaxParameters) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.label, ": brings the model over ", kMaxParameters, " parameters (",
          kMaxParameters * 4 / (int64_t{1} << 30), " GiB as float32), more than psflow holds"));
    }
    r.output = *out;
    r.detail = walk.detail;
    r.parameters = walk.parameters;
    shape = *out;
    reports.push_back(std::move(r));
  }
  if (shape.back() != spec.num_classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last layer, ", reports.back().label, ", produces ", shape.back(),
                     " values per prediction (output ", ShapeText(shape),
                     "), but the model has classes: ", spec.num_classes, " (its logits)"));
  }
  return reports;
}

}  // namespace psflow::models
