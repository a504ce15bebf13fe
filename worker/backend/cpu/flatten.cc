#include "worker/backend/cpu/flatten.h"

#include <algorithm>

namespace psflow::cpu {

absl::StatusOr<nn::Shape> Flatten::Build(const nn::Shape& input, const nn::BuildContext&) {
  return nn::Shape{nn::NumElements(input)};
}

void Flatten::Forward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y) {
  std::copy(x.data, x.data + x.size(), y.data);
}

void Flatten::Backward(const nn::RunContext&, const nn::Matrix&, const nn::Matrix&,
                       const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx != nullptr) std::copy(dy.data, dy.data + dy.size(), dx->data);
}

}  // namespace psflow::cpu
