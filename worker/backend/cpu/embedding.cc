#include "worker/backend/cpu/embedding.h"

#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/nn/batch_checks.h"

namespace psflow::cpu {

absl::StatusOr<nn::Shape> Embedding::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  if (spec_.vocab_size < 1 || spec_.dim < 1) {
    return absl::InvalidArgumentError("embedding vocab_size and dim must be >= 1");
  }
  if (input.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding expects [time] token ids per example, got ", input.size(), " dims"));
  }
  table_ = ctx.params->Declare(absl::StrCat(name(), "/embeddings"), {spec_.vocab_size, spec_.dim},
                               spec_.init);
  ctx.params->MarkSparse(table_);
  rows_.reserve(static_cast<size_t>(ctx.max_batch * input[0]));
  time_ = input[0];
  return nn::Shape{input[0], spec_.dim};
}

absl::Status Embedding::Prepare(const nn::RunContext& ctx, int64_t rows) {
  if (ctx.host_input == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), ": needs the batch's token ids in host memory"));
  }
  RETURN_IF_ERROR(
      nn::CollectTokenRows(name(), ctx.host_input, rows * time_, spec_.vocab_size, rows_));
  if (ctx.training) ctx.params->SetTouchedRows(table_, rows_);
  return absl::OkStatus();
}

void Embedding::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  const float* table = ctx.params->value(table_).data();
  const size_t row_bytes = static_cast<size_t>(spec_.dim) * sizeof(float);
  for (int64_t i = 0; i < x.size(); ++i) {
    const auto id = static_cast<int64_t>(x.data[i]);
    assert(id >= 0 && id < spec_.vocab_size);
    std::memcpy(y.data + i * spec_.dim, table + id * spec_.dim, row_bytes);
  }
}

void Embedding::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix&,
                         const nn::Matrix& dy, const nn::Matrix*) {
  float* grad = ctx.params->grad(table_).data();
  const int dim = spec_.dim;
  // The touched rows were reported by Prepare.
  for (int64_t i = 0; i < x.size(); ++i) {
    const auto id = static_cast<int64_t>(x.data[i]);
    float* g = grad + id * dim;
    const float* d = dy.data + i * dim;
    for (int c = 0; c < dim; ++c) g[c] += d[c];
  }
}

}  // namespace psflow::cpu
