#include "worker/backend/cuda/embedding.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/kernels.h"

namespace psflow::cuda {

Embedding::Embedding(Context& ctx, const nn::EmbeddingSpec& spec, std::string name)
    : Layer(std::move(name)), ctx_(ctx), spec_(spec) {}

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
  where_ = absl::StrCat(name(), " [batch<=", ctx.max_batch, ", ", input[0], "] -> [", input[0],
                        ", ", spec_.dim, "] (vocabulary ", spec_.vocab_size, ")");
  return nn::Shape{input[0], spec_.dim};
}

void Embedding::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  LaunchEmbeddingGather(x.data, x.size(), ctx.params->device_value(table_).data(), spec_.vocab_size,
                        spec_.dim, y.data, ctx_.stream());
  ctx_.CheckLaunch(where_);
}

void Embedding::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix&,
                         const nn::Matrix& dy, const nn::Matrix*) {
  LaunchEmbeddingScatterAdd(x.data, x.size(), dy.data, spec_.vocab_size, spec_.dim,
                            ctx.params->device_grad(table_).data(), ctx_.stream());
  ctx_.CheckLaunch(where_);
  // The touched rows, from the host copy of the ids while the GPU scatters.
  if (ctx.host_input == nullptr) {
    ctx_.Fail(absl::FailedPreconditionError(
        absl::StrCat(where_,
                     ": backward needs the batch's token ids in host memory "
                     "(RunContext::host_input) to report the touched rows")));
    return;
  }
  rows_.clear();
  for (int64_t i = 0; i < x.size(); ++i) {
    const auto id = static_cast<int64_t>(ctx.host_input[i]);
    if (id < 0 || id >= spec_.vocab_size) {
      ctx_.Fail(absl::InvalidArgumentError(absl::StrCat(where_, ": token id ", ctx.host_input[i],
                                                        " at position ", i,
                                                        " is outside the vocabulary")));
      return;
    }
    rows_.push_back(id);
  }
  std::sort(rows_.begin(), rows_.end());
  rows_.erase(std::unique(rows_.begin(), rows_.end()), rows_.end());
  ctx.params->SetTouchedRows(table_, rows_);
}

}  // namespace psflow::cuda
