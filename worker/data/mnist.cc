#include "worker/data/mnist.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/data/idx.h"

namespace psflow::data {
namespace {

std::string FindFile(const std::string& dir, const std::string& stem) {
  const std::string gz = absl::StrCat(dir, "/", stem, ".gz");
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz;
  const std::string plain = absl::StrCat(dir, "/", stem);
  if (std::filesystem::exists(plain, ec)) return plain;
  return gz;  // ReadIdx reports it missing, by the name the packages ship
}

}  // namespace

absl::StatusOr<Dataset> LoadMnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_path = FindFile(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = FindFile(dir, prefix + "-labels-idx1-ubyte");
  ASSIGN_OR_RETURN(IdxArray images, ReadIdx(images_path));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(labels_path));
  if (images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28) {
    return absl::DataLossError(absl::StrCat(images_path, ": expected [N,28,28] images"));
  }
  if (labels.dims.size() != 1 || labels.dims[0] != images.dims[0]) {
    return absl::DataLossError(
        absl::StrCat(labels_path, ": expected ", images.dims[0], " labels to match ", images_path));
  }
  Dataset d;
  d.example_shape = {784};
  d.num_classes = 10;
  d.inputs.resize(images.values.size());
  for (size_t i = 0; i < images.values.size(); ++i) d.inputs[i] = images.values[i] / 255.0f;
  d.labels.resize(labels.values.size());
  for (size_t i = 0; i < labels.values.size(); ++i) {
    if (labels.values[i] >= 10) {
      return absl::DataLossError(absl::StrCat(labels_path, ": label ", labels.values[i],
                                              " at index ", i, " is not in 0..9"));
    }
    d.labels[i] = labels.values[i];
  }
  return d;
}

}  // namespace psflow::data
