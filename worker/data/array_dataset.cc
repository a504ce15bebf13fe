#include "worker/data/array_dataset.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "worker/data/input_file.h"
#include "worker/data/npz.h"

namespace psflow::data {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status CheckOptions(const ArrayDataOptions& options) {
  bool positive = !options.example_shape.empty();
  for (int64_t d : options.example_shape) positive &= d >= 1;
  if (!positive) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's input shape ", ShapeString(options.example_shape), " is not a shape of data"));
  }
  if (options.num_classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_classes is ", options.num_classes, "; a classifier needs at least 1"));
  }
  if (!std::isfinite(options.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the feature scale ", options.scale, " is not finite"));
  }
  return absl::OkStatus();
}

// That `a`'s data holds what its shape says (ParseNpy's arrays always do; one built by hand may
// not).
absl::Status CheckConsistent(const NpyArray& a, absl::string_view name) {
  uint64_t bytes = static_cast<uint64_t>(NpyTypeSize(a.type));
  bool bad = false;
  for (int64_t d : a.shape) {
    bad |= d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  }
  if (bad || bytes != a.data.size()) {
    return absl::DataLossError(absl::StrCat(name, ": an array of shape ", ShapeString(a.shape),
                                            " and dtype ", NpyTypeName(a.type), " with ",
                                            a.data.size(), " bytes of data"));
  }
  return absl::OkStatus();
}

// Multiplies every value by options.scale and checks it is finite, and a token id where the
// options say so; `where(i)` names value i in errors.
template <class Where>
absl::Status ScaleFeatures(std::vector<float>& values, const ArrayDataOptions& options,
                           Where&& where) {
  const float scale = options.scale;
  const auto vocabulary = static_cast<float>(options.token_vocabulary);
  for (size_t i = 0; i < values.size(); ++i) {
    const float unscaled = values[i];
    values[i] *= scale;
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(i), " is ", unscaled, scale == 1 ? "" : absl::StrCat(" (times ", scale, ")"),
          "; features must be finite"));
    }
    if (options.token_vocabulary > 0 &&
        (values[i] < 0 || values[i] >= vocabulary || values[i] != std::floor(values[i]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(i), " is ", values[i], "; the input is token ids, whole numbers in 0..",
          options.token_vocabulary - 1, " (the embedding's vocab_size ", options.token_vocabulary,
          ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<int32_t> ToInt32(const std::vector<int64_t>& labels) {
  return std::vector<int32_t>(labels.begin(), labels.end());
}

absl::StatusOr<std::vector<int32_t>> TokenIdsFromNpy(const std::string& path, int vocab_size) {
  ASSIGN_OR_RETURN(const NpyArray a, ReadNpy(path));
  if (a.shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": token ids of shape ",
                                                   ShapeString(a.shape), "; expected a 1-D array"));
  }
  if (!NpyTypeIsInteger(a.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": token ids of dtype ", NpyTypeName(a.type),
                     "; expected an integer dtype (save ids.astype(np.int32))"));
  }
  ASSIGN_OR_RETURN(const std::vector<int64_t> ids, a.ToIntegers(path));
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": holds no token ids"));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": token id ", ids[i], " at index ", i, " is outside 0..", vocab_size - 1,
          " (the model's classes: a language model's ids are its labels)"));
    }
  }
  return ToInt32(ids);
}

absl::StatusOr<std::vector<int32_t>> TokenIdsFromText(const std::string& path, int vocab_size) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  std::vector<int32_t> ids;
  int64_t line = 1;
  size_t i = 0;
  while (i < text.size()) {
    if (absl::ascii_isspace(static_cast<unsigned char>(text[i]))) {
      line += text[i] == '\n';
      ++i;
      continue;
    }
    const size_t begin = i;
    int64_t id = 0;
    bool digits = true;
    while (i < text.size() && !absl::ascii_isspace(static_cast<unsigned char>(text[i]))) {
      digits &= absl::ascii_isdigit(static_cast<unsigned char>(text[i]));
      // Saturates: any id past vocab_size is out of range whatever its value.
      if (digits) id = std::min<int64_t>(id * 10 + (text[i] - '0'), int64_t{1} << 40);
      ++i;
    }
    const absl::string_view token = absl::string_view(text).substr(begin, i - begin);
    if (!digits) {
      return absl::DataLossError(
          absl::StrCat(path, ":", line, ": \"", absl::CHexEscape(token.substr(0, 40)),
                       "\" is not a token id (a non-negative decimal integer)"));
    }
    if (id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line, ": token id ", token, " is outside 0..", vocab_size - 1,
                       " (the model's classes: a language model's ids are its labels)"));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) return absl::DataLossError(absl::StrCat(path, ": holds no token ids"));
  return ids;
}

}  // namespace

absl::StatusOr<Dataset> DatasetFromArrays(const NpyArray& features, absl::string_view features_name,
                                          const NpyArray& labels, absl::string_view labels_name,
                                          const ArrayDataOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(CheckConsistent(features, features_name));
  RETURN_IF_ERROR(CheckConsistent(labels, labels_name));
  const int64_t per_example = nn::NumElements(options.example_shape);
  if (features.shape.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(features_name,
                     ": features are a 0-d array; expected [examples, ...] (the model's input is ",
                     ShapeString(options.example_shape), ")"));
  }
  const int64_t n = features.shape[0];
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        features_name, ": features of shape ", ShapeString(features.shape), " hold no examples"));
  }
  if (features.size() / n != per_example) {
    return absl::InvalidArgumentError(
        absl::StrCat(features_name, ": features of shape ", ShapeString(features.shape), " hold ",
                     features.size() / n, " values per example; the model's input ",
                     ShapeString(options.example_shape), " takes ", per_example));
  }
  const bool labels_fit =
      (labels.shape.size() == 1 && labels.shape[0] == n) ||
      (labels.shape.size() == 2 && labels.shape[0] == n && labels.shape[1] == 1);
  if (!labels_fit) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_name, ": labels of shape ", ShapeString(labels.shape), "; expected [",
                     n, "] or [", n, ", 1], one label for each example of ", features_name));
  }
  ASSIGN_OR_RETURN(const std::vector<int64_t> label_values, labels.ToIntegers(labels_name));
  for (size_t i = 0; i < label_values.size(); ++i) {
    if (label_values[i] < 0 || label_values[i] >= options.num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          labels_name, ": label ", label_values[i], " of example ", i, " is outside 0..",
          options.num_classes - 1, " (the model has ", options.num_classes, " classes)"));
    }
  }
  Dataset d;
  d.example_shape = options.example_shape;
  d.num_classes = options.num_classes;
  d.inputs = features.ToFloats();
  RETURN_IF_ERROR(ScaleFeatures(d.inputs, options, [&](size_t i) {
    return absl::StrCat(features_name, ": value ", i % per_example, " of example ",
                        i / per_example);
  }));
  d.labels = ToInt32(label_values);
  return d;
}

absl::StatusOr<Dataset> LoadNpzSplit(const std::string& npz_path, const std::string& features_name,
                                     const std::string& labels_name,
                                     const ArrayDataOptions& options) {
  ASSIGN_OR_RETURN(const NpyArray features, ReadNpzMember(npz_path, features_name));
  ASSIGN_OR_RETURN(const NpyArray labels, ReadNpzMember(npz_path, labels_name));
  return DatasetFromArrays(features, absl::StrCat(npz_path, ":", features_name), labels,
                           absl::StrCat(npz_path, ":", labels_name), options);
}

absl::StatusOr<Dataset> LoadNpySplit(const std::string& features_path,
                                     const std::string& labels_path,
                                     const ArrayDataOptions& options) {
  ASSIGN_OR_RETURN(const NpyArray features, ReadNpy(features_path));
  ASSIGN_OR_RETURN(const NpyArray labels, ReadNpy(labels_path));
  return DatasetFromArrays(features, features_path, labels, labels_path, options);
}

absl::StatusOr<Dataset> LoadCsv(const std::string& path, const CsvOptions& csv_options,
                                const ArrayDataOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  ASSIGN_OR_RETURN(CsvTable table, ReadCsv(path, csv_options));
  const int64_t per_example = nn::NumElements(options.example_shape);
  const auto label_column = [&] {
    const int64_t c = table.label_column;
    return table.column_names.empty()
               ? absl::StrCat("column ", c + 1)
               : absl::StrCat("column ", c + 1, " (\"", absl::CHexEscape(table.column_names[c]),
                              "\")");
  };
  if (table.features_per_row() != per_example) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", table.features_per_row(),
        table.features_per_row() == 1 ? " feature column (" : " feature columns (", table.columns,
        " columns, the label in ", label_column(), "); the model's input ",
        ShapeString(options.example_shape), " takes ", per_example));
  }
  for (int64_t i = 0; i < table.rows(); ++i) {
    const int64_t label = table.labels[i];
    if (label >= options.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", table.first_row_line + i, ": ", label_column(), ": label ", label,
                       " is outside 0..", options.num_classes - 1, " (the model has ",
                       options.num_classes, " classes)"));
    }
  }
  Dataset d;
  d.example_shape = options.example_shape;
  d.num_classes = options.num_classes;
  d.inputs = std::move(table.features);
  RETURN_IF_ERROR(ScaleFeatures(d.inputs, options, [&](size_t i) {
    return absl::StrCat(path, ":", table.first_row_line + static_cast<int64_t>(i) / per_example,
                        ": feature ", i % per_example + 1);
  }));
  d.labels = ToInt32(table.labels);
  return d;
}

absl::StatusOr<std::vector<int32_t>> LoadTokenIds(const std::string& path, int vocab_size) {
  if (vocab_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": vocab_size is ", vocab_size, "; it must be at least 1"));
  }
  if (absl::EndsWithIgnoreCase(path, ".npy")) return TokenIdsFromNpy(path, vocab_size);
  return TokenIdsFromText(path, vocab_size);
}

}  // namespace psflow::data
