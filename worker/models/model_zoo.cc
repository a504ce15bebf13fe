#include "worker/models/model_zoo.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::models {

nn::ModelSpec MnistMlp() {
  return nn::ModelSpec{
      .name = "mnist_mlp",
      .input_shape = {784},
      .num_classes = 10,
      .layers = {nn::DenseSpec{100}, nn::ActivationSpec{nn::ActivationKind::kSigmoid},
                 nn::DenseSpec{10}},
  };
}

std::vector<std::string> ModelNames() { return {"mnist_mlp"}; }

absl::StatusOr<nn::ModelSpec> ModelByName(absl::string_view name) {
  if (name == "mnist_mlp") return MnistMlp();
  return absl::NotFoundError(
      absl::StrCat("unknown model \"", name, "\"; known: ", absl::StrJoin(ModelNames(), ", ")));
}

}  // namespace psflow::models
