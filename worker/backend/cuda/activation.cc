#include "worker/backend/cuda/activation.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/backend/cuda/kernels.h"

namespace psflow::cuda {
Activation::Activation(Context& ctx, const nn::ActivationSpec& spec, std::string name)
    : Layer(std::move(name)), ctx_(ctx), kind_(spec.kind) {}

absl::StatusOr<nn::Shape> Activation::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  where_ = absl::StrCat(name(), " (", nn::ActivationKindName(kind_), ") [batch<=", ctx.max_batch,
                        ", ", absl::StrJoin(input, ", "), "]");
  return input;
}

void Activation::Forward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y) {
  // The launchers number the kinds in nn::ActivationKind's order.
  LaunchActivationForward(static_cast<int>(kind_), x.data, y.data, x.size(), ctx_.stream());
  ctx_.CheckLaunch(where_);
}

void Activation::Backward(const nn::RunContext&, const nn::Matrix&, const nn::Matrix& y,
                          const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx == nullptr) return;
  LaunchActivationBackward(static_cast<int>(kind_), y.data, dy.data, dx->data, y.size(),
                           ctx_.stream());
  ctx_.CheckLaunch(where_);
}

}  // namespace psflow::cuda
