#include "worker/backend/cuda/lrn.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::cuda {

absl::StatusOr<nn::Shape> Lrn::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  if (input.empty()) return absl::InvalidArgumentError("lrn needs an input with channels");
  if (spec_.depth_radius < 0) return absl::InvalidArgumentError("lrn depth_radius must be >= 0");
  if (!(spec_.bias > 0) || !(spec_.alpha >= 0)) {
    return absl::InvalidArgumentError("lrn needs bias > 0 and alpha >= 0");
  }
  if (input.back() < 1) return absl::InvalidArgumentError("lrn needs at least one channel");
  params_ = LrnParams{input.back(), spec_.depth_radius, spec_.bias, spec_.alpha, spec_.beta};
  const int64_t max_batch = std::max<int64_t>(ctx.max_batch, 1);
  max_elements_ = max_batch * nn::NumElements(input);
  where_ = absl::StrCat(name(), " [batch<=", max_batch, ", ", absl::StrJoin(input, ", "), "]");
  for (auto [array, what] : {std::pair{&scale_, "n^-beta"}, std::pair{&terms_, "gradient terms"}}) {
    auto a = ctx_.Allocate<float>(max_elements_, absl::StrCat(where_, ": ", what));
    if (!a.ok()) return a.status();
    *array = *std::move(a);
  }
  return input;
}

void Lrn::Forward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y) {
  if (x.size() == 0) return;
  if (x.size() > max_elements_) {
    ctx_.Fail(absl::InvalidArgumentError(absl::StrCat(where_, ": called with ", x.rows, " rows")));
    return;
  }
  LaunchLrnForward(x.data, x.size(), params_, y.data, scale_.get(), ctx_.stream());
  ctx_.CheckLaunch(where_);
}

void Lrn::Backward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y,
                   const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx == nullptr || x.size() == 0 || x.size() > max_elements_) return;
  LaunchLrnBackward(x.data, y.data, dy.data, scale_.get(), x.size(), params_, terms_.get(),
                    dx->data, ctx_.stream());
  ctx_.CheckLaunch(where_);
}

}  // namespace psflow::cuda
