#include "worker/backend/cuda/dropout.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/backend/cuda/kernels.h"

namespace psflow::cuda {

Dropout::Dropout(Context& ctx, const nn::DropoutSpec& spec, std::string name)
    : Layer(std::move(name)), ctx_(ctx), spec_(spec) {}

absl::StatusOr<nn::Shape> Dropout::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  if (!(spec_.keep_prob > 0.0f && spec_.keep_prob <= 1.0f)) {
    return absl::InvalidArgumentError("dropout keep_prob must be in (0, 1]");
  }
  seed_ = ctx.seed;
  where_ = absl::StrCat(name(), " (keep ", spec_.keep_prob, ") [batch<=", ctx.max_batch, ", ",
                        absl::StrJoin(input, ", "), "]");
  return input;
}

void Dropout::Apply(bool masked, uint64_t step, const float* in, float* out, int64_t n) {
  if (n <= 0) return;
  if (masked && spec_.keep_prob < 1.0f) {
    LaunchDropout(in, out, n, spec_.keep_prob, seed_, step, ctx_.stream());
    ctx_.CheckLaunch(where_);
  } else if (in != out) {
    ctx_.Check(cudaMemcpyAsync(out, in, static_cast<size_t>(n) * sizeof(float),
                               cudaMemcpyDeviceToDevice, ctx_.stream()),
               where_);
  }
}

void Dropout::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  Apply(ctx.training, ctx.step, x.data, y.data, x.size());
}

void Dropout::Backward(const nn::RunContext& ctx, const nn::Matrix&, const nn::Matrix&,
                       const nn::Matrix& dy, const nn::Matrix* dx) {
  // As the CPU layer: Backward always applies the step's mask (it only runs in training).
  if (dx != nullptr) Apply(true, ctx.step, dy.data, dx->data, dy.size());
}

}  // namespace psflow::cuda
