#include "worker/backend/cuda/max_pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "worker/nn/layer_build.h"

namespace psflow::cuda {

absl::StatusOr<nn::Shape> MaxPool::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  absl::StatusOr<nn::Window2D> w = nn::BuildMaxPool(spec_, input);
  if (!w.ok()) return w.status();
  PoolGeometry& g = geometry_;
  g.in_h = w->in_h;
  g.in_w = w->in_w;
  g.channels = w->channels;
  g.out_h = w->out_h;
  g.out_w = w->out_w;
  g.pad_top = w->pad_top;
  g.pad_left = w->pad_left;
  g.window = spec_.window;
  g.stride = spec_.stride;
  max_batch_ = std::max<int64_t>(ctx.max_batch, 1);
  where_ = absl::StrCat(name(), " [batch<=", max_batch_, ", ", g.in_h, ", ", g.in_w, ", ",
                        g.channels, "] -> [", g.out_h, ", ", g.out_w, ", ", g.channels, "]");
  auto argmax = ctx_.Allocate<int32_t>(max_batch_ * g.out_h * g.out_w * g.channels,
                                       absl::StrCat(where_, ": argmax"));
  if (!argmax.ok()) return argmax.status();
  argmax_ = *std::move(argmax);
  return nn::Shape{g.out_h, g.out_w, g.channels};
}

void MaxPool::Forward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y) {
  if (x.rows == 0) return;
  if (x.rows > max_batch_) {
    ctx_.Fail(absl::InvalidArgumentError(absl::StrCat(where_, ": called with ", x.rows, " rows")));
    return;
  }
  LaunchMaxPoolForward(x.data, x.rows, geometry_, y.data, argmax_.get(), ctx_.stream());
  ctx_.CheckLaunch(where_);
}

void MaxPool::Backward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& /*y*/,
                       const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx == nullptr || x.rows == 0 || x.rows > max_batch_) return;
  LaunchMaxPoolBackward(dy.data, argmax_.get(), x.rows, geometry_, dx->data, ctx_.stream());
  ctx_.CheckLaunch(where_);
}

}  // namespace psflow::cuda
