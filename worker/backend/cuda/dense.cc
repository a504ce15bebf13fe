#include "worker/backend/cuda/dense.h"

#include <cublas_v2.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/backend/cuda/cublas_util.h"
#include "worker/backend/cuda/kernels.h"
#include "worker/nn/layer_build.h"

namespace psflow::cuda {

Dense::Dense(Context& ctx, const nn::DenseSpec& spec, std::string name)
    : Layer(std::move(name)), ctx_(ctx), spec_(spec) {}

absl::StatusOr<nn::Shape> Dense::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  absl::StatusOr<nn::DenseBuild> b = nn::BuildDense(spec_, name(), input, ctx);
  if (!b.ok()) return b.status();
  in_ = b->in;
  positions_ = b->positions;
  kernel_ = b->kernel;
  bias_ = b->bias;
  where_ = absl::StrCat(name(), " [batch<=", ctx.max_batch, ", ", absl::StrJoin(input, ", "),
                        "] -> [", absl::StrJoin(b->out, ", "), "]");
  return b->out;
}

void Dense::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  const float* w = ctx.params->device_value(kernel_).data();
  const float* b = ctx.params->device_value(bias_).data();
  const int m = static_cast<int>(x.rows * positions_), k = static_cast<int>(in_), n = spec_.units;
  // y = broadcast(b); y += x * W
  LaunchBroadcastRows(b, y.data, m, n, ctx_.stream());
  ctx_.CheckLaunch(where_);
  ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), false, false, m, n, k, 1.0f, x.data,
                          k, w, n, 1.0f, y.data, n),
             where_);
}

void Dense::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& /*y*/,
                     const nn::Matrix& dy, const nn::Matrix* dx) {
  const int m = static_cast<int>(x.rows * positions_), k = static_cast<int>(in_), n = spec_.units;
  const float* w = ctx.params->device_value(kernel_).data();
  float* dw = ctx.params->device_grad(kernel_).data();
  float* db = ctx.params->device_grad(bias_).data();
  // dW += x^T * dy   [k, n]
  ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), true, false, k, n, m, 1.0f, x.data, k,
                          dy.data, n, 1.0f, dw, n),
             where_);
  if (spec_.weight_decay > 0) {
    // Default (host) pointer mode: alpha is read from the host when the call is made.
    const float decay = ctx.loss_scale * spec_.weight_decay;
    ctx_.Check(cublasSaxpy(ctx_.cublas(), k * n, &decay, w, 1, dw, 1), where_);
  }
  // db += column sums of dy
  LaunchColumnSums(dy.data, db, m, n, ctx_.stream());
  ctx_.CheckLaunch(where_);
  if (dx != nullptr) {
    // dx = dy * W^T   [m, k]
    ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), false, true, m, k, n, 1.0f, dy.data,
                            n, w, n, 0.0f, dx->data, k),
               where_);
  }
}

double Dense::RegularizationLoss(const nn::ParameterSet& params) const {
  if (spec_.weight_decay <= 0) return 0;
  double sum = 0;
  for (float v : params.value(kernel_)) sum += static_cast<double>(v) * v;
  return 0.5 * spec_.weight_decay * sum;
}

}  // namespace psflow::cuda
