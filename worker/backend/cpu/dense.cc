#include "worker/backend/cpu/dense.h"

#include <cblas.h>

#include "absl/strings/str_cat.h"

namespace psflow::cpu {

absl::StatusOr<nn::Shape> Dense::Build(const nn::Shape& input, nn::ParameterSet& params) {
  if (spec_.units < 1) return absl::InvalidArgumentError("dense units must be >= 1");
  if (input.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense expects a flat input per example, got ", input.size(), " dims"));
  }
  in_ = input[0];
  kernel_ = params.Declare(absl::StrCat(name(), "/kernel"), {in_, spec_.units},
                           nn::Initializer::GlorotUniform());
  bias_ = params.Declare(absl::StrCat(name(), "/bias"), {spec_.units}, nn::Initializer::Zeros());
  return nn::Shape{spec_.units};
}

void Dense::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  const float* w = ctx.params->value(kernel_).data();
  const float* b = ctx.params->value(bias_).data();
  const int m = static_cast<int>(x.rows), k = static_cast<int>(in_), n = spec_.units;
  // y = broadcast(b); y += x * W
  for (int r = 0; r < m; ++r) std::copy(b, b + n, y.row(r));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x.data, k, w, n, 1.0f,
              y.data, n);
}

void Dense::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& /*y*/,
                     const nn::Matrix& dy, const nn::Matrix* dx) {
  const int m = static_cast<int>(x.rows), k = static_cast<int>(in_), n = spec_.units;
  float* dw = ctx.params->grad(kernel_).data();
  float* db = ctx.params->grad(bias_).data();
  // dW += x^T * dy   [k, n]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1.0f, x.data, k, dy.data, n, 1.0f,
              dw, n);
  // db += column sums of dy
  for (int r = 0; r < m; ++r) {
    const float* row = dy.row(r);
    for (int c = 0; c < n; ++c) db[c] += row[c];
  }
  if (dx != nullptr) {
    // dx = dy * W^T   [m, k]
    const float* w = ctx.params->value(kernel_).data();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n, 1.0f, dy.data, n, w, n, 0.0f,
                dx->data, k);
  }
}

}  // namespace psflow::cpu
