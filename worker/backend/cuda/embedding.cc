#include "worker/backend/cuda/embedding.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/backend/cuda/kernels.h"
#include "worker/nn/batch_checks.h"
#include "worker/nn/layer_build.h"

namespace psflow::cuda {

Embedding::Embedding(Context& ctx, const nn::EmbeddingSpec& spec, std::string name)
    : Layer(std::move(name)), ctx_(ctx), spec_(spec) {}

absl::StatusOr<nn::Shape> Embedding::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  absl::StatusOr<nn::EmbeddingBuild> b = nn::BuildEmbedding(spec_, name(), input, ctx);
  if (!b.ok()) return b.status();
  table_ = b->table;
  time_ = b->time;
  rows_.reserve(static_cast<size_t>(ctx.max_batch * time_));
  where_ = absl::StrCat(name(), " [batch<=", ctx.max_batch, ", ", input[0], "] -> [", input[0],
                        ", ", spec_.dim, "] (vocabulary ", spec_.vocab_size, ")");
  return b->out;
}

absl::Status Embedding::Prepare(const nn::RunContext& ctx, int64_t rows) {
  if (ctx.host_input == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        where_, ": needs the batch's token ids in host memory (RunContext::host_input)"));
  }
  RETURN_IF_ERROR(
      nn::CollectTokenRows(where_, ctx.host_input, rows * time_, spec_.vocab_size, rows_));
  if (ctx.training) ctx.params->SetTouchedRows(table_, rows_);
  return absl::OkStatus();
}

absl::Status Embedding::ListRowsRead(const float* host_input, int64_t rows,
                                     nn::ParameterSet& params) const {
  return nn::CollectTokenRows(where_, host_input, rows * time_, spec_.vocab_size,
                              params.mutable_rows_to_pull(table_));
}

void Embedding::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  LaunchEmbeddingGather(x.data, x.size(), ctx.params->device_value(table_).data(), spec_.vocab_size,
                        spec_.dim, y.data, ctx_.stream());
  ctx_.CheckLaunch(where_);
}

void Embedding::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix&,
                         const nn::Matrix& dy, const nn::Matrix*) {
  // The touched rows were reported by Prepare.
  LaunchEmbeddingScatterAdd(x.data, x.size(), dy.data, spec_.vocab_size, spec_.dim,
                            ctx.params->device_grad(table_).data(), ctx_.stream());
  ctx_.CheckLaunch(where_);
}

}  // namespace psflow::cuda
