#include "worker/models/model_file.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/optimizer_settings.h"
#include "core/read_file.h"
#include "core/status_macros.h"
#include "worker/models/model_check.h"
#include "worker/models/yaml_error.h"
#include "yaml-cpp/yaml.h"

namespace psflow::models {
namespace {

// A YAML map read key by key: every key must be read (Finish), so a misspelt option is an
// error, not a default silently taken. Errors are "<source>:<line>: <where>: <what>".
class MapReader {
 public:
  MapReader(absl::string_view source, const YAML::Node& node, std::string where)
      : source_(source), node_(node), where_(std::move(where)) {}

  absl::Status Error(const YAML::Node& at, absl::string_view what) const {
    const YAML::Mark mark = at.IsDefined() ? at.Mark() : node_.Mark();
    const std::string line = mark.is_null() ? "" : absl::StrCat(":", mark.line + 1);
    return absl::InvalidArgumentError(absl::StrCat(source_, line, ": ", where_, ": ", what));
  }
  absl::Status CheckMap() const {
    return node_.IsMap() ? absl::OkStatus() : Error(node_, "must be a map of options");
  }
  bool Has(const char* key) const { return node_[key].IsDefined(); }
  // The value at `key` (undefined when absent), marked as read.
  YAML::Node Node(const char* key) {
    read_.insert(key);
    return node_[key];
  }

  absl::StatusOr<std::string> String(const char* key, std::string fallback) {
    const YAML::Node n = Node(key);
    if (!n.IsDefined()) return fallback;
    if (!n.IsScalar()) return Error(n, absl::StrCat(key, " must be a string"));
    return n.Scalar();
  }
  absl::StatusOr<std::string> RequiredString(const char* key) {
    if (!Has(key)) return Error(node_, absl::StrCat(key, " is required"));
    return String(key, "");
  }
  absl::StatusOr<int64_t> Int(const char* key, int64_t fallback, int64_t min) {
    const YAML::Node n = Node(key);
    if (!n.IsDefined()) return fallback;
    return IntValue(n, key, min);
  }
  absl::StatusOr<int64_t> RequiredInt(const char* key, int64_t min) {
    if (!Has(key)) return Error(node_, absl::StrCat(key, " is required"));
    return Int(key, 0, min);
  }
  absl::StatusOr<int64_t> IntValue(const YAML::Node& n, absl::string_view what, int64_t min) {
    int64_t v = 0;
    if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &v)) {
      return Error(n, absl::StrCat(what, " must be an integer, got ", Text(n)));
    }
    if (v < min || v > std::numeric_limits<int32_t>::max()) {
      return Error(n, absl::StrCat(what, " must be in [", min, ", ",
                                   std::numeric_limits<int32_t>::max(), "], got ", v));
    }
    return v;
  }
  // A finite float; `positive`: > 0, else >= 0 unless `any_sign`.
  absl::StatusOr<float> Float(const char* key, float fallback, bool positive,
                              bool any_sign = false) {
    const YAML::Node n = Node(key);
    if (!n.IsDefined()) return fallback;
    return FloatValue(n, key, positive, any_sign);
  }
  absl::StatusOr<float> FloatValue(const YAML::Node& n, absl::string_view what, bool positive,
                                   bool any_sign = false) {
    float v = 0;
    if (!n.IsScalar() || !absl::SimpleAtof(n.Scalar(), &v) || !std::isfinite(v)) {
      return Error(n, absl::StrCat(what, " must be a finite number, got ", Text(n)));
    }
    if (positive && !(v > 0)) return Error(n, absl::StrCat(what, " must be > 0, got ", v));
    if (!positive && !any_sign && v < 0) {
      return Error(n, absl::StrCat(what, " must be >= 0, got ", v));
    }
    return v;
  }
  absl::StatusOr<bool> Bool(const char* key, bool fallback) {
    const YAML::Node n = Node(key);
    if (!n.IsDefined()) return fallback;
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) {
      return n.Scalar() == "true";
    }
    return Error(n, absl::StrCat(key, " must be true or false, got ", Text(n)));
  }
  // One of `names` (the first when absent and `required` is false).
  absl::StatusOr<std::string> OneOf(const char* key, const std::vector<std::string>& names,
                                    bool required) {
    if (required && !Has(key)) {
      return Error(node_, absl::StrCat(key, " is required: one of ", absl::StrJoin(names, ", ")));
    }
    ASSIGN_OR_RETURN(std::string v, String(key, names.front()));
    for (const std::string& n : names) {
      if (v == n) return v;
    }
    return Error(node_[key], absl::StrCat(key, " must be one of ", absl::StrJoin(names, ", "),
                                          ", got \"", v, "\""));
  }
  // A string or a list of strings, as a list.
  absl::StatusOr<std::vector<std::string>> Strings(const char* key) {
    const YAML::Node n = Node(key);
    if (!n.IsDefined()) return std::vector<std::string>{};
    if (n.IsScalar()) return std::vector<std::string>{n.Scalar()};
    std::vector<std::string> out;
    if (n.IsSequence()) {
      for (const YAML::Node& item : n) {
        if (!item.IsScalar()) break;
        out.push_back(item.Scalar());
      }
      if (out.size() == n.size()) return out;
    }
    return Error(n, absl::StrCat(key, " must be a file name or a list of them"));
  }

  // Before reading: an error for the first key not in `known` (a typo is told as such, not as
  // the required option it misses) or given twice.
  absl::Status CheckKeys(const std::vector<std::string>& known) const {
    return CheckEachKey(known, [&](const std::string& key) {
      return std::find(known.begin(), known.end(), key) != known.end();
    });
  }

  // After reading: an error for the first key not read, or given twice.
  absl::Status Finish(const std::vector<std::string>& known) const {
    return CheckEachKey(known, [&](const std::string& key) { return read_.count(key) > 0; });
  }
  const std::string& where() const { return where_; }

 private:
  // The first key that is repeated or not `allowed`, as an error naming the keys `known`.
  template <class Allowed>
  absl::Status CheckEachKey(const std::vector<std::string>& known, Allowed allowed) const {
    std::set<std::string> seen;
    for (const auto& entry : node_) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
      // YAML maps keep a repeated key twice and a lookup finds the first: say so, rather than
      // quietly ignore the second.
      if (!seen.insert(key).second) {
        return Error(entry.first, absl::StrCat("option \"", key, "\" given twice"));
      }
      if (!allowed(key)) return UnknownKey(entry.first, key, known);
    }
    return absl::OkStatus();
  }
  absl::Status UnknownKey(const YAML::Node& at, const std::string& key,
                          const std::vector<std::string>& known) const {
    return Error(
        at,
        absl::StrCat("unknown option \"", key, "\"",
                     known.empty() ? " (this takes none)"
                                   : absl::StrCat(" (known: ", absl::StrJoin(known, ", "), ")")));
  }
  static std::string Text(const YAML::Node& n) {
    return n.IsScalar() ? absl::StrCat("\"", n.Scalar(), "\"") : "a list or map";
  }

  absl::string_view source_;
  const YAML::Node node_;
  std::string where_;
  std::set<std::string> read_;
};

// "zeros", "glorot_uniform", {constant: V}, {uniform: SCALE}, {truncated_normal: STDDEV}.
absl::StatusOr<nn::Initializer> ParseInitializer(MapReader& layer, const char* key,
                                                 nn::Initializer fallback) {
  const YAML::Node n = layer.Node(key);
  if (!n.IsDefined()) return fallback;
  const std::string usage =
      absl::StrCat(key,
                   " must be zeros, glorot_uniform, {constant: VALUE}, {uniform: SCALE} or "
                   "{truncated_normal: STDDEV}");
  if (n.IsScalar()) {
    if (n.Scalar() == "zeros") return nn::Initializer::Zeros();
    if (n.Scalar() == "glorot_uniform") return nn::Initializer::GlorotUniform();
    return layer.Error(n, absl::StrCat(usage, ", got \"", n.Scalar(), "\""));
  }
  if (!n.IsMap() || n.size() != 1) return layer.Error(n, usage);
  const std::string kind = n.begin()->first.Scalar();
  const YAML::Node value = n.begin()->second;
  if (kind == "constant") {
    ASSIGN_OR_RETURN(float v, layer.FloatValue(value, "constant", false, true));
    return nn::Initializer::Constant(v);
  }
  if (kind == "uniform" || kind == "truncated_normal") {
    ASSIGN_OR_RETURN(float v, layer.FloatValue(value, kind, true));
    return kind == "uniform" ? nn::Initializer::Uniform(v) : nn::Initializer::TruncatedNormal(v);
  }
  return layer.Error(n, usage);
}

absl::StatusOr<nn::Padding> ParsePadding(MapReader& layer) {
  ASSIGN_OR_RETURN(std::string p, layer.OneOf("padding", {"same", "valid"}, false));
  return p == "same" ? nn::Padding::kSame : nn::Padding::kValid;
}

const std::vector<std::string>& LayerTypes() {
  static const auto* types = new std::vector<std::string>{"dense",   "conv2d",  "max_pool",  "lrn",
                                                          "flatten", "dropout", "embedding", "lstm",
                                                          "relu",    "sigmoid", "tanh"};
  return *types;
}

// What a layer declares about its input, checked once the shapes are known.
struct DeclaredInput {
  int64_t in_features = 0;  // dense: the last dimension of its input
  int64_t in_channels = 0;  // conv2d: the channels of its input
};

// A name as layers and models may have: it names parameters in checkpoints and exports.
bool IsName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// The options a layer of `type` takes (besides type and name).
std::vector<std::string> LayerOptions(absl::string_view type) {
  if (type == "dense")
    return {"type", "name", "units", "in_features", "kernel_init", "bias_init", "weight_decay"};
  if (type == "conv2d")
    return {"type",    "name",        "filters",     "kernel_size", "stride",
            "padding", "in_channels", "kernel_init", "bias_init"};
  if (type == "max_pool") return {"type", "name", "size", "stride", "padding"};
  if (type == "lrn") return {"type", "name", "depth_radius", "bias", "alpha", "beta"};
  if (type == "dropout") return {"type", "name", "keep_prob"};
  if (type == "embedding") return {"type", "name", "vocab_size", "dim", "init"};
  if (type == "lstm") return {"type", "name", "units", "forget_bias", "init"};
  return {"type", "name"};
}

// One entry of `layers`: its spec (options), name and declared input.
absl::Status ParseLayer(absl::string_view source, const YAML::Node& node, size_t index,
                        nn::ModelSpec& spec, DeclaredInput& declared) {
  MapReader probe(source, node, absl::StrCat("layer ", index));
  RETURN_IF_ERROR(probe.CheckMap());
  ASSIGN_OR_RETURN(std::string type, probe.OneOf("type", LayerTypes(), true));
  ASSIGN_OR_RETURN(std::string name, probe.String("name", ""));
  MapReader r(source, node,
              absl::StrCat("layer ", index, " (", type, name.empty() ? "" : " \"", name,
                           name.empty() ? "" : "\"", ")"));
  r.Node("type");
  r.Node("name");
  if (node["name"].IsDefined() && !IsName(name)) {
    return r.Error(node["name"], absl::StrCat("name \"", name,
                                              "\" must be 1 to 64 letters, digits, '_', '-' or '.' "
                                              "(it names the layer's parameters)"));
  }
  const std::vector<std::string> known = LayerOptions(type);
  RETURN_IF_ERROR(r.CheckKeys(known));
  nn::LayerSpec layer;
  if (type == "dense") {
    nn::DenseSpec d;
    ASSIGN_OR_RETURN(d.units, r.RequiredInt("units", 1));
    ASSIGN_OR_RETURN(declared.in_features, r.Int("in_features", 0, 1));
    ASSIGN_OR_RETURN(d.kernel_init, ParseInitializer(r, "kernel_init", d.kernel_init));
    ASSIGN_OR_RETURN(d.bias_init, ParseInitializer(r, "bias_init", d.bias_init));
    ASSIGN_OR_RETURN(d.weight_decay, r.Float("weight_decay", 0, false));
    layer = d;
  } else if (type == "conv2d") {
    nn::Conv2DSpec c;
    ASSIGN_OR_RETURN(c.filters, r.RequiredInt("filters", 1));
    ASSIGN_OR_RETURN(c.kernel_size, r.RequiredInt("kernel_size", 1));
    ASSIGN_OR_RETURN(c.stride, r.Int("stride", 1, 1));
    ASSIGN_OR_RETURN(c.padding, ParsePadding(r));
    ASSIGN_OR_RETURN(declared.in_channels, r.Int("in_channels", 0, 1));
    ASSIGN_OR_RETURN(c.kernel_init, ParseInitializer(r, "kernel_init", c.kernel_init));
    ASSIGN_OR_RETURN(c.bias_init, ParseInitializer(r, "bias_init", c.bias_init));
    layer = c;
  } else if (type == "max_pool") {
    nn::MaxPoolSpec p;
    ASSIGN_OR_RETURN(p.window, r.Int("size", 2, 1));
    ASSIGN_OR_RETURN(p.stride, r.Int("stride", 2, 1));
    ASSIGN_OR_RETURN(p.padding, ParsePadding(r));
    layer = p;
  } else if (type == "lrn") {
    nn::LrnSpec l;
    ASSIGN_OR_RETURN(l.depth_radius, r.Int("depth_radius", l.depth_radius, 0));
    ASSIGN_OR_RETURN(l.bias, r.Float("bias", l.bias, false));
    ASSIGN_OR_RETURN(l.alpha, r.Float("alpha", l.alpha, false));
    ASSIGN_OR_RETURN(l.beta, r.Float("beta", l.beta, false));
    layer = l;
  } else if (type == "flatten") {
    layer = nn::FlattenSpec{};
  } else if (type == "dropout") {
    nn::DropoutSpec d;
    if (!r.Has("keep_prob")) return r.Error(node, "keep_prob is required");
    ASSIGN_OR_RETURN(d.keep_prob, r.Float("keep_prob", 1, true));
    if (d.keep_prob > 1) {
      return r.Error(node["keep_prob"],
                     absl::StrCat("keep_prob must be in (0, 1], got ", d.keep_prob));
    }
    layer = d;
  } else if (type == "embedding") {
    nn::EmbeddingSpec e;
    ASSIGN_OR_RETURN(e.vocab_size, r.RequiredInt("vocab_size", 1));
    ASSIGN_OR_RETURN(e.dim, r.RequiredInt("dim", 1));
    ASSIGN_OR_RETURN(e.init, ParseInitializer(r, "init", e.init));
    layer = e;
  } else if (type == "lstm") {
    nn::LstmSpec l;
    ASSIGN_OR_RETURN(l.units, r.RequiredInt("units", 1));
    ASSIGN_OR_RETURN(l.forget_bias, r.Float("forget_bias", 0, false, true));
    ASSIGN_OR_RETURN(l.init, ParseInitializer(r, "init", l.init));
    layer = l;
  } else {
    layer = nn::ActivationSpec{type == "relu"      ? nn::ActivationKind::kRelu
                               : type == "sigmoid" ? nn::ActivationKind::kSigmoid
                                                   : nn::ActivationKind::kTanh};
  }
  RETURN_IF_ERROR(r.Finish(known));
  spec.layers.push_back(layer);
  spec.layer_names.push_back(name);
  return absl::OkStatus();
}

absl::Status ParseTraining(absl::string_view source, const YAML::Node& node, Recipe& recipe) {
  MapReader t(source, node, "training");
  RETURN_IF_ERROR(t.CheckMap());
  const std::vector<std::string> keys = {
      "optimizer",     "learning_rate",         "momentum", "batch_size", "epochs",
      "max_grad_norm", "learning_rate_schedule"};
  RETURN_IF_ERROR(t.CheckKeys(keys));
  ASSIGN_OR_RETURN(recipe.optimizer, t.String("optimizer", recipe.optimizer));
  ASSIGN_OR_RETURN(recipe.learning_rate, t.Float("learning_rate", recipe.learning_rate, true));
  ASSIGN_OR_RETURN(recipe.momentum, t.Float("momentum", recipe.momentum, false));
  // Checked as the worker will (MakeOptimizer's own first checks), so validate and admission
  // say it.
  if (const absl::Status s =
          CheckOptimizerSettings(recipe.optimizer, recipe.learning_rate, recipe.momentum);
      !s.ok()) {
    return t.Error(node, s.message());
  }
  ASSIGN_OR_RETURN(recipe.batch_size, t.Int("batch_size", recipe.batch_size, 1));
  ASSIGN_OR_RETURN(int64_t epochs, t.Int("epochs", recipe.epochs, 1));
  recipe.epochs = static_cast<int>(epochs);
  ASSIGN_OR_RETURN(recipe.max_grad_norm, t.Float("max_grad_norm", recipe.max_grad_norm, false));
  if (const YAML::Node s = t.Node("learning_rate_schedule"); s.IsDefined()) {
    MapReader m(source, s, "training.learning_rate_schedule");
    RETURN_IF_ERROR(m.CheckMap());
    LearningRateSchedule& l = recipe.schedule;
    ASSIGN_OR_RETURN(l.decay, m.Float("decay", l.decay, true));
    ASSIGN_OR_RETURN(int64_t first, m.Int("first_decay_epoch", l.first_decay_epoch, 0));
    ASSIGN_OR_RETURN(int64_t every, m.Int("decay_every_epochs", l.decay_every_epochs, 1));
    l.first_decay_epoch = static_cast<int>(first);
    l.decay_every_epochs = static_cast<int>(every);
    RETURN_IF_ERROR(m.Finish({"decay", "first_decay_epoch", "decay_every_epochs"}));
  }
  return t.Finish(keys);
}

const std::vector<std::string>& FormatNames() {
  static const auto* names =
      new std::vector<std::string>{"mnist", "cifar10", "ptb", "npz", "npy", "csv", "tokens"};
  return *names;
}

DataSpec::Format FormatByName(const std::string& name) {
  const auto& names = FormatNames();
  return static_cast<DataSpec::Format>(std::find(names.begin(), names.end(), name) - names.begin());
}

// The options `data` takes in each format.
std::vector<std::string> DataOptions(DataSpec::Format format) {
  using Format = DataSpec::Format;
  switch (format) {
    case Format::kNpz:
      return {"format", "file", "train", "test", "scale"};
    case Format::kNpy:
      return {"format", "train", "test", "scale"};
    case Format::kCsv:
      return {"format", "train", "test", "label_column", "header", "scale"};
    case Format::kTokens:
      return {"format", "train", "valid", "test"};
    case Format::kMnist:
    case Format::kCifar10:
    case Format::kPtb:
      break;  // the seeds' files, found under --data_path
  }
  return {"format"};
}

absl::Status ParseData(absl::string_view source, const YAML::Node& node, DataSpec& d) {
  RETURN_IF_ERROR(MapReader(source, node, "data").CheckMap());
  const YAML::Node f = node["format"];
  const std::string named = f.IsDefined() && f.IsScalar() ? f.Scalar() : "";
  MapReader r(source, node, named.empty() ? "data" : absl::StrCat("data (", named, ")"));
  if (!r.Has("format")) {  // a typo of it is told as the typo
    RETURN_IF_ERROR(r.CheckKeys(
        {"format", "file", "train", "valid", "test", "label_column", "header", "scale"}));
  }
  ASSIGN_OR_RETURN(std::string format, r.OneOf("format", FormatNames(), true));
  d.format = FormatByName(format);
  using Format = DataSpec::Format;
  const std::vector<std::string> known = DataOptions(d.format);
  RETURN_IF_ERROR(r.CheckKeys(known));
  // `key` as a list of `n` names (when given), else `fallback`.
  auto names = [&](const char* key, size_t n,
                   std::vector<std::string> fallback) -> absl::StatusOr<std::vector<std::string>> {
    if (!r.Has(key)) return fallback;
    ASSIGN_OR_RETURN(std::vector<std::string> v, r.Strings(key));
    if (v.size() != n && !v.empty()) {
      return r.Error(node[key], absl::StrCat(key, " must name ",
                                             n == 2 ? "two: the features and "
                                                      "the labels"
                                                    : "one file",
                                             ", got ", v.size()));
    }
    return v;
  };
  switch (d.format) {
    case Format::kMnist:
    case Format::kCifar10:
    case Format::kPtb:
      break;  // the seeds' files, found under --data_path
    case Format::kNpz: {
      ASSIGN_OR_RETURN(d.file, r.String("file", "data.npz"));
      ASSIGN_OR_RETURN(d.train, names("train", 2, {"x_train", "y_train"}));
      ASSIGN_OR_RETURN(d.test, names("test", 2, {"x_test", "y_test"}));
      break;
    }
    case Format::kNpy: {
      ASSIGN_OR_RETURN(d.train, names("train", 2, {"x_train.npy", "y_train.npy"}));
      ASSIGN_OR_RETURN(d.test, names("test", 2, {"x_test.npy", "y_test.npy"}));
      break;
    }
    case Format::kCsv: {
      ASSIGN_OR_RETURN(d.train, names("train", 1, {"train.csv"}));
      ASSIGN_OR_RETURN(d.test, names("test", 1, {"test.csv"}));
      ASSIGN_OR_RETURN(d.label_column, r.String("label_column", d.label_column));
      ASSIGN_OR_RETURN(d.header, r.Bool("header", d.header));
      break;
    }
    case Format::kTokens: {
      ASSIGN_OR_RETURN(d.train, names("train", 1, {"train.txt"}));
      ASSIGN_OR_RETURN(d.valid, names("valid", 1, {"valid.txt"}));
      ASSIGN_OR_RETURN(d.test, names("test", 1, {"test.txt"}));
      break;
    }
  }
  if (d.train.empty() && (d.format == Format::kNpz || d.format == Format::kNpy ||
                          d.format == Format::kCsv || d.format == Format::kTokens)) {
    return r.Error(node["train"], "train must name the training data");
  }
  ASSIGN_OR_RETURN(d.scale, r.Float("scale", 1, true));
  return r.Finish(known);
}

absl::Status ParseInput(absl::string_view source, const YAML::Node& node, nn::Shape& shape,
                        bool& token_ids) {
  MapReader r(source, node, "input");
  RETURN_IF_ERROR(r.CheckMap());
  RETURN_IF_ERROR(r.CheckKeys({"shape", "type"}));
  const YAML::Node s = r.Node("shape");
  if (!s.IsDefined() || !s.IsSequence() || s.size() == 0) {
    return r.Error(s.IsDefined() ? s : node,
                   "shape is required: the dimensions of one example, e.g. [28, 28, 1]");
  }
  for (const YAML::Node& d : s) {
    ASSIGN_OR_RETURN(int64_t v, r.IntValue(d, "every dimension of shape", 1));
    shape.push_back(v);
  }
  ASSIGN_OR_RETURN(std::string type, r.OneOf("type", {"float32", "token_ids"}, false));
  token_ids = type == "token_ids";
  if (token_ids && shape.size() != 1) {
    return r.Error(s, absl::StrCat("token_ids take one dimension, the sequence length; got ",
                                   ShapeText(shape)));
  }
  return r.Finish({"shape", "type"});
}

// What the data's format requires of the model.
absl::Status CheckDataFits(const ModelDefinition& m, bool token_ids) {
  const int64_t elements = nn::NumElements(m.spec.input_shape);
  const char* format = DataFormatName(m.data.format);
  if (m.language_model() && !token_ids) {
    return absl::InvalidArgumentError(
        absl::StrCat("data format ", format,
                     " is a language model's token stream: input type must be "
                     "token_ids"));
  }
  if (m.language_model() && m.input_vocabulary() > 0 && m.input_vocabulary() < m.spec.num_classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a language model's embedding vocab_size (", m.input_vocabulary(),
                     ") is smaller than its classes (", m.spec.num_classes,
                     "): the token ids are its labels too, up to classes - 1, and its inputs"));
  }
  struct Fixed {
    DataSpec::Format format;
    int64_t elements;
    const char* shape;
  };
  for (const Fixed& f : {Fixed{DataSpec::Format::kMnist, 784, "28x28x1 (784 values)"},
                         Fixed{DataSpec::Format::kCifar10, 24 * 24 * 3, "24x24x3 crops"}}) {
    if (m.data.format != f.format) continue;
    if (elements != f.elements || token_ids) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data format ", format, " gives float32 examples of ", f.shape, ", but the input is ",
          ShapeText(m.spec.input_shape), token_ids ? " token_ids" : ""));
    }
    if (m.spec.num_classes < 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("data format ", format,
                       " has 10 classes, but the model has classes: ", m.spec.num_classes));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelDefinition> Parse(absl::string_view source, const YAML::Node& doc) {
  ModelDefinition m;
  MapReader top(source, doc, "model file");
  RETURN_IF_ERROR(top.CheckMap());
  const std::vector<std::string> top_keys = {"name", "input",    "classes", "layers",
                                             "loss", "training", "data",    "evaluation"};
  RETURN_IF_ERROR(top.CheckKeys(top_keys));
  ASSIGN_OR_RETURN(m.spec.name, top.RequiredString("name"));
  if (!IsName(m.spec.name)) {
    return top.Error(doc["name"], absl::StrCat("name \"", m.spec.name,
                                               "\" must be 1 to 64 letters, digits, '_', '-' or "
                                               "'.'"));
  }
  if (!top.Has("input")) return top.Error(doc, "input is required");
  bool token_ids = false;
  RETURN_IF_ERROR(ParseInput(source, top.Node("input"), m.spec.input_shape, token_ids));
  ASSIGN_OR_RETURN(int64_t classes, top.RequiredInt("classes", 1));
  m.spec.num_classes = static_cast<int>(classes);
  const YAML::Node layers = top.Node("layers");
  if (!layers.IsDefined() || !layers.IsSequence() || layers.size() == 0) {
    return top.Error(layers.IsDefined() ? layers : doc, "layers is required: a list of layers");
  }
  std::vector<DeclaredInput> declared(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    RETURN_IF_ERROR(ParseLayer(source, layers[i], i, m.spec, declared[i]));
  }
  RETURN_IF_ERROR(top.OneOf("loss", {"softmax_cross_entropy"}, false).status());
  if (const YAML::Node t = top.Node("training"); t.IsDefined()) {
    RETURN_IF_ERROR(ParseTraining(source, t, m.recipe));
  }
  if (!top.Has("data")) return top.Error(doc, "data is required: {format: ...}");
  RETURN_IF_ERROR(ParseData(source, top.Node("data"), m.data));
  if (const YAML::Node e = top.Node("evaluation"); e.IsDefined()) {
    MapReader r(source, e, "evaluation");
    RETURN_IF_ERROR(r.CheckMap());
    if (!m.language_model()) {
      return r.Error(e, "is for language models (data format ptb or tokens)");
    }
    ASSIGN_OR_RETURN(int64_t length, r.Int("sequence_length", 0, 1));
    m.eval_sequence_length = static_cast<int>(length);
    RETURN_IF_ERROR(r.Finish({"sequence_length"}));
  }
  RETURN_IF_ERROR(top.Finish(top_keys));
  if (m.language_model() && m.eval_sequence_length == 0) {
    m.eval_sequence_length = static_cast<int>(m.spec.input_shape[0]);
  }
  auto fail = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  };
  if (absl::Status s = CheckDataFits(m, token_ids); !s.ok()) return fail(s);
  absl::StatusOr<std::vector<LayerReport>> reports = CheckModel(m.spec, token_ids);
  if (!reports.ok()) return fail(reports.status());
  const nn::Shape& out = reports->back().output;
  const nn::Shape one_per_step = {m.spec.input_shape[0], m.spec.num_classes};
  if (m.language_model() ? out != one_per_step : out.size() != 1) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "the model's output per example is ", ShapeText(out), ", but data format ",
        DataFormatName(m.data.format), " has ",
        m.language_model()
            ? absl::StrCat("a label per time step: ", ShapeText(one_per_step), " logits")
            : "one label per example: add a flatten before the last dense layer")));
  }
  for (size_t i = 0; i < declared.size(); ++i) {
    const nn::Shape& in = (*reports)[i].input;
    const std::string producer =
        i == 0 ? "the input has" : absl::StrCat(LayerLabel(m.spec, i - 1), " produces");
    if (declared[i].in_features > 0 && in.back() != declared[i].in_features) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          (*reports)[i].label, ": in_features ", declared[i].in_features, " does not match the ",
          in.back(), " values per position that ", producer, " (", ShapeText(in), ")")));
    }
    if (declared[i].in_channels > 0 && in.back() != declared[i].in_channels) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          (*reports)[i].label, ": in_channels ", declared[i].in_channels, " does not match the ",
          in.back(), " channels that ", producer, " (", ShapeText(in), ")")));
    }
  }
  return m;
}

// The error as one line: control characters the file's own text brought in (a key with a line
// break) escaped.
absl::Status OneLine(const absl::Status& status) {
  std::string line;
  for (char c : status.message()) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      absl::StrAppend(&line, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      line += c;
    }
  }
  return absl::Status(status.code(), line);
}

absl::StatusOr<ModelDefinition> ParseText(absl::string_view text, absl::string_view source) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ":", e.mark.line + 1, ": not valid YAML or JSON: ", DescribeYamlError(e)));
  }
  try {
    ASSIGN_OR_RETURN(ModelDefinition m, Parse(source, doc));
    m.source = std::string(text);
    return m;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed model file: ", e.msg));
  }
}

}  // namespace

absl::StatusOr<ModelDefinition> ParseModelFile(absl::string_view text, absl::string_view source) {
  absl::StatusOr<ModelDefinition> m = ParseText(text, source);
  if (!m.ok()) return OneLine(m.status());
  return m;
}

absl::StatusOr<ModelDefinition> ReadModelFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseModelFile(*text, path);
}

const char* DataFormatName(DataSpec::Format format) {
  return FormatNames()[static_cast<size_t>(format)].c_str();
}

nn::ModelSpec ModelDefinition::eval_spec() const {
  nn::ModelSpec s = spec;
  if (language_model()) s.input_shape = {eval_sequence_length};
  return s;
}

}  // namespace psflow::models
