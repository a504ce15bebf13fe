#include "worker/backend/cpu/embedding.h"

#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/nn/batch_checks.h"
#include "worker/nn/layer_build.h"

namespace psflow::cpu {

absl::StatusOr<nn::Shape> Embedding::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  absl::StatusOr<nn::EmbeddingBuild> b = nn::BuildEmbedding(spec_, name(), input, ctx);
  if (!b.ok()) return b.status();
  table_ = b->table;
  time_ = b->time;
  rows_.reserve(static_cast<size_t>(ctx.max_batch * time_));
  return b->out;
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

absl::Status Embedding::ListRowsRead(const float* host_input, int64_t rows,
                                     nn::ParameterSet& params) const {
  return nn::CollectTokenRows(name(), host_input, rows * time_, spec_.vocab_size,
                              params.mutable_rows_to_pull(table_));
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
