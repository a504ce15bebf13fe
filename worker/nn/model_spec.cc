#include "worker/nn/model_spec.h"

#include "absl/strings/str_cat.h"

namespace psflow::nn {

std::string ModelSpec::LayerName(size_t i) const {
  if (i < layer_names.size() && !layer_names[i].empty()) return layer_names[i];
  return absl::StrCat(LayerKindName(layers[i]), i);
}

}  // namespace psflow::nn
