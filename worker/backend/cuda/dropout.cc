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
  if (!masks()) return input;
  absl::StatusOr<DeviceArray<uint64_t>> step = ctx_.Allocate<uint64_t>(1, where_);
  if (!step.ok()) return step.status();
  step_ = *std::move(step);
  void* pinned = nullptr;
  if (cudaError_t e = cudaMallocHost(&pinned, sizeof(uint64_t)); e != cudaSuccess) {
    cudaGetLastError();
    return CudaError(e, absl::StrCat(where_, ": the step in pinned host memory"));
  }
  host_step_.reset(static_cast<uint64_t*>(pinned));
  *host_step_ = 0;
  return input;
}

absl::Status Dropout::Prepare(const nn::RunContext& ctx, int64_t) {
  // The previous step's copy has finished: every step ends waiting for the stream.
  if (masks()) *host_step_ = ctx.step;
  return absl::OkStatus();
}

void Dropout::Apply(bool masked, const float* in, float* out, int64_t n) {
  if (n <= 0) return;
  if (masked && masks()) {
    LaunchDropout(in, out, n, spec_.keep_prob, seed_, step_.get(), ctx_.stream());
    ctx_.CheckLaunch(where_);
  } else if (in != out) {
    ctx_.Check(cudaMemcpyAsync(out, in, static_cast<size_t>(n) * sizeof(float),
                               cudaMemcpyDeviceToDevice, ctx_.stream()),
               where_);
  }
}

void Dropout::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  if (ctx.training && masks()) {
    ctx_.Check(cudaMemcpyAsync(step_.get(), host_step_.get(), sizeof(uint64_t),
                               cudaMemcpyHostToDevice, ctx_.stream()),
               where_);
  }
  Apply(ctx.training, x.data, y.data, x.size());
}

void Dropout::Backward(const nn::RunContext&, const nn::Matrix&, const nn::Matrix&,
                       const nn::Matrix& dy, const nn::Matrix* dx) {
  // As the CPU layer: Backward always applies the step's mask (it only runs in training).
  if (dx != nullptr) Apply(true, dy.data, dx->data, dy.size());
}

}  // namespace psflow::cuda
