#include "worker/backend/cpu/dense.h"

#include "absl/strings/str_cat.h"
#include "worker/backend/cpu/gemm.h"
#include "worker/backend/cpu/vector_math.h"
#include "worker/nn/layer_build.h"

namespace psflow::cpu {

absl::StatusOr<nn::Shape> Dense::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  absl::StatusOr<nn::DenseBuild> b = nn::BuildDense(spec_, name(), input, ctx);
  if (!b.ok()) return b.status();
  in_ = b->in;
  positions_ = b->positions;
  kernel_ = b->kernel;
  bias_ = b->bias;
  return b->out;
}

void Dense::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  const float* w = ctx.params->value(kernel_).data();
  const float* b = ctx.params->value(bias_).data();
  const int m = static_cast<int>(x.rows * positions_), k = static_cast<int>(in_), n = spec_.units;
  // y = broadcast(b); y += x * W
  for (int r = 0; r < m; ++r) std::copy(b, b + n, y.data + static_cast<int64_t>(r) * n);
  Gemm(pool_, blas::kNoTrans, blas::kNoTrans, m, n, k, 1.0f, x.data, k, w, n, 1.0f, y.data, n);
}

void Dense::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& /*y*/,
                     const nn::Matrix& dy, const nn::Matrix* dx) {
  const int m = static_cast<int>(x.rows * positions_), k = static_cast<int>(in_), n = spec_.units;
  const float* w = ctx.params->value(kernel_).data();
  float* dw = ctx.params->grad(kernel_).data();
  float* db = ctx.params->grad(bias_).data();
  // dW += x^T * dy   [k, n]
  Gemm(pool_, blas::kTrans, blas::kNoTrans, k, n, m, 1.0f, x.data, k, dy.data, n, 1.0f, dw, n);
  if (spec_.weight_decay > 0) {
    blas::Axpy(k * n, ctx.loss_scale * spec_.weight_decay, w, dw);
  }
  // db += column sums of dy
  AddColumnSums(dy.data, m, n, db);
  if (dx != nullptr) {
    // dx = dy * W^T   [m, k]
    Gemm(pool_, blas::kNoTrans, blas::kTrans, m, k, n, 1.0f, dy.data, n, w, n, 0.0f, dx->data, k);
  }
}

double Dense::RegularizationLoss(const nn::ParameterSet& params) const {
  if (spec_.weight_decay <= 0) return 0;
  double sum = 0;
  for (float v : params.value(kernel_)) sum += static_cast<double>(v) * v;
  return 0.5 * spec_.weight_decay * sum;
}

}  // namespace psflow::cpu
