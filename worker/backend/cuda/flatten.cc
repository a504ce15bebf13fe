#include "worker/backend/cuda/flatten.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::cuda {

Flatten::Flatten(Context& ctx, std::string name) : Layer(std::move(name)), ctx_(ctx) {}

absl::StatusOr<nn::Shape> Flatten::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  const nn::Shape out{nn::NumElements(input)};
  where_ = absl::StrCat(name(), " [batch<=", ctx.max_batch, ", ", absl::StrJoin(input, ", "),
                        "] -> [", out[0], "]");
  return out;
}

void Flatten::Copy(const float* from, float* to, int64_t n) {
  if (n <= 0 || from == to) return;
  ctx_.Check(cudaMemcpyAsync(to, from, static_cast<size_t>(n) * sizeof(float),
                             cudaMemcpyDeviceToDevice, ctx_.stream()),
             where_);
}

void Flatten::Forward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y) {
  Copy(x.data, y.data, x.size());
}

void Flatten::Backward(const nn::RunContext&, const nn::Matrix&, const nn::Matrix&,
                       const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx != nullptr) Copy(dy.data, dx->data, dy.size());
}

}  // namespace psflow::cuda
