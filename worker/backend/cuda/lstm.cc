#include "worker/backend/cuda/lstm.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/log.h"

namespace psflow::cuda {
namespace {

constexpr char kImplEnv[] = "PSFLOW_LSTM_IMPL";
// Timed passes per path after one warm-up pass (which lets cuBLAS and cuDNN pick and load their
// kernels): enough to rank two paths whose gap matters, cheap at build.
constexpr int kTimedPasses = 3;

struct EventDestroy {
  void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
};
using Event = std::unique_ptr<CUevent_st, EventDestroy>;

absl::StatusOr<Event> MakeEvent(absl::string_view where) {
  cudaEvent_t e = nullptr;
  if (cudaError_t err = cudaEventCreate(&e); err != cudaSuccess) return CudaError(err, where);
  return Event(e);
}

}  // namespace

Lstm::Lstm(Context& ctx, const nn::LstmSpec& spec, std::string name)
    : Layer(std::move(name)), ctx_(ctx), spec_(spec) {}

absl::StatusOr<nn::Shape> Lstm::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  if (spec_.units < 1) return absl::InvalidArgumentError("lstm units must be >= 1");
  if (input.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("lstm expects [time, features] per example, got ", input.size(), " dims"));
  }
  if (input[0] < 1 || input[1] < 1 || ctx.max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("lstm needs time, features and batch >= 1, got [", input[0], ", ", input[1],
                     "] and batch ", ctx.max_batch));
  }
  dims_ = LstmDims{.max_batch = static_cast<int>(ctx.max_batch),
                   .time = static_cast<int>(input[0]),
                   .in = static_cast<int>(input[1]),
                   .units = spec_.units,
                   .forget_bias = spec_.forget_bias};
  const int64_t in = dims_.in, u = dims_.units;
  kernel_ = ctx.params->Declare(absl::StrCat(name(), "/kernel"), {in + u, 4 * u}, spec_.init);
  bias_ = ctx.params->Declare(absl::StrCat(name(), "/bias"), {4 * u}, spec_.init);
  where_ = absl::StrCat(name(), " [batch<=", dims_.max_batch, ", ", dims_.time, ", ", dims_.in,
                        "] -> [", dims_.time, ", ", dims_.units, "]");

  const int64_t state_floats = static_cast<int64_t>(dims_.max_batch) * u;
  for (DeviceArray<float>* buffer : {&state_h_, &state_c_, &call_h0_, &call_c0_}) {
    absl::StatusOr<DeviceArray<float>> a =
        ctx_.Allocate<float>(state_floats, absl::StrCat(where_, ": state"));
    if (!a.ok()) return a.status();
    *buffer = *std::move(a);
  }

  const char* env = std::getenv(kImplEnv);
  const std::string forced = env != nullptr ? env : "";
  if (!forced.empty()) {
    if (forced != "fused" && forced != "cudnn" && forced != "cudnn_persistent") {
      return absl::InvalidArgumentError(
          absl::StrCat(kImplEnv, "=", forced,
                       ": expected fused, cudnn or cudnn_persistent (or unset: the fastest)"));
    }
    absl::StatusOr<std::unique_ptr<LstmPath>> path = MakePath(forced);
    if (!path.ok()) return path.status();
    path_ = *std::move(path);
    PSFLOW_LOG(INFO) << where_ << ": " << kImplEnv << " selects the " << path_->name()
                     << " LSTM path";
  } else if (absl::Status s = ChooseFastest(); !s.ok()) {
    return s;
  }
  return nn::Shape{dims_.time, dims_.units};
}

absl::StatusOr<std::unique_ptr<LstmPath>> Lstm::MakePath(absl::string_view name) {
  const LstmState state{call_h0_.get(), call_c0_.get(), state_h_.get(), state_c_.get()};
  if (name == "fused") return MakeFusedLstmPath(ctx_, dims_, state, where_);
  return MakeCudnnLstmPath(
      ctx_, dims_, state, where_,
      name == "cudnn" ? CudnnRnnAlgo::kStandard : CudnnRnnAlgo::kPersistStatic);
}

absl::Status Lstm::ChooseFastest() {
  // The fused path always exists (its errors are the layer's); cuDNN's may be refused.
  absl::StatusOr<std::unique_ptr<LstmPath>> fused = MakePath("fused");
  if (!fused.ok()) return fused.status();
  absl::StatusOr<DeviceArray<float>> scratch = ctx_.Allocate<float>(
      ScratchFloats(), absl::StrCat(where_, ": scratch for timing the LSTM paths"));
  if (!scratch.ok()) {
    PSFLOW_LOG(WARNING) << where_
                        << ": using the fused LSTM path untimed: " << scratch.status().message();
    path_ = *std::move(fused);
    return absl::OkStatus();
  }
  // Errors recorded before the measurement are not the paths': report them as such.
  if (absl::Status s = ctx_.Synchronize(where_); !s.ok()) return s;
  absl::StatusOr<float> fused_ms = TimePasses(**fused, scratch->get());
  if (!fused_ms.ok()) return fused_ms.status();
  std::string times = absl::StrFormat("fused %.3f ms", *fused_ms);
  float best_ms = *fused_ms;
  path_ = *std::move(fused);
  for (const char* name : {"cudnn", "cudnn_persistent"}) {
    absl::StatusOr<std::unique_ptr<LstmPath>> candidate = MakePath(name);
    absl::StatusOr<float> ms =
        candidate.ok() ? TimePasses(**candidate, scratch->get()) : candidate.status();
    if (!ms.ok()) {
      // Not chosen, and said why once: cuDNN refuses some sizes (persistent: large ones).
      absl::StrAppend(&times, ", ", name, " unavailable (", ms.status().message(), ")");
      continue;
    }
    absl::StrAppend(&times, absl::StrFormat(", %s %.3f ms", name, *ms));
    if (*ms < best_ms) {
      best_ms = *ms;
      // The path replaced is freed only after the GPU is done with it.
      if (absl::Status s = ctx_.Synchronize(where_); !s.ok()) return s;
      path_ = *std::move(candidate);
    }
  }
  // The measurement ran on the carried state: every call starts from zeros again.
  ResetState();
  PSFLOW_LOG(INFO) << absl::StrFormat(
      "%s: using the %s LSTM path (forward+backward of %d rows: %s)", where_, path_->name(),
      dims_.max_batch, times);
  // The paths not kept are freed when their unique_ptrs go: after the GPU is done with them.
  return ctx_.Synchronize(where_);
}

// Kernel and bias, their gradients, x, dx, y, dy.
int64_t Lstm::ScratchFloats() const {
  const int64_t b = dims_.max_batch, t = dims_.time, in = dims_.in, u = dims_.units;
  return 2 * (in + u + 1) * 4 * u + 2 * b * t * in + 2 * b * t * u;
}

absl::StatusOr<float> Lstm::TimePasses(LstmPath& path, float* scratch) {
  const int64_t b = dims_.max_batch, t = dims_.time, in = dims_.in, u = dims_.units;
  const int64_t params = (in + u + 1) * 4 * u;
  // Zeroed scratch (ScratchFloats): the values do not matter for the time of these dense
  // computations.
  float* kernel = scratch;
  float* bias = kernel + (in + u) * 4 * u;
  float* d_kernel = kernel + params;
  float* d_bias = d_kernel + (in + u) * 4 * u;
  float* x = kernel + 2 * params;
  float* dx = x + b * t * in;
  float* y = dx + b * t * in;
  float* dy = y + b * t * u;

  absl::StatusOr<Event> start = MakeEvent(where_), stop = MakeEvent(where_);
  if (!start.ok()) return start.status();
  if (!stop.ok()) return stop.status();
  const int batch = dims_.max_batch;
  for (int pass = 0; pass <= kTimedPasses; ++pass) {
    if (pass == 1) ctx_.Check(cudaEventRecord(start->get(), ctx_.stream()), where_);
    path.Forward(batch, x, y, kernel, bias);
    path.Backward(batch, x, y, dy, dx, kernel, d_kernel, d_bias);
  }
  ctx_.Check(cudaEventRecord(stop->get(), ctx_.stream()), where_);
  // Returns (and clears) what the passes raised: a path that fails is not chosen.
  if (absl::Status s = ctx_.Synchronize(absl::StrCat(where_, " timing the ", path.name(), " path"));
      !s.ok()) {
    return s;
  }
  float ms = 0;
  if (cudaError_t e = cudaEventElapsedTime(&ms, start->get(), stop->get()); e != cudaSuccess) {
    return CudaError(e, where_);
  }
  return ms / kTimedPasses;
}

bool Lstm::CheckBatch(int64_t rows) {
  if (rows >= 1 && rows <= dims_.max_batch && path_ != nullptr) return true;
  ctx_.Fail(absl::InvalidArgumentError(
      absl::StrCat(where_, ": a call of ", rows, " rows (built for 1..", dims_.max_batch, ")")));
  return false;
}

void Lstm::ResetState() {
  const size_t bytes = static_cast<size_t>(dims_.max_batch) * dims_.units * sizeof(float);
  if (bytes == 0 || state_h_ == nullptr) return;  // not built yet: nothing carried
  ctx_.Check(cudaMemsetAsync(state_h_.get(), 0, bytes, ctx_.stream()), where_);
  ctx_.Check(cudaMemsetAsync(state_c_.get(), 0, bytes, ctx_.stream()), where_);
}

void Lstm::RewindState() {
  const size_t bytes = static_cast<size_t>(call_rows_) * dims_.units * sizeof(float);
  if (bytes == 0) return;  // no call yet
  ctx_.Check(cudaMemcpyAsync(state_h_.get(), call_h0_.get(), bytes, cudaMemcpyDeviceToDevice,
                             ctx_.stream()),
             where_);
  ctx_.Check(cudaMemcpyAsync(state_c_.get(), call_c0_.get(), bytes, cudaMemcpyDeviceToDevice,
                             ctx_.stream()),
             where_);
}

void Lstm::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  if (!CheckBatch(x.rows)) return;
  const int batch = static_cast<int>(x.rows);
  call_rows_ = batch;
  // The carried state becomes this call's initial state (Backward's hx/cx); the path writes the
  // new final state over the carried one.
  const size_t bytes = static_cast<size_t>(batch) * dims_.units * sizeof(float);
  ctx_.Check(cudaMemcpyAsync(call_h0_.get(), state_h_.get(), bytes, cudaMemcpyDeviceToDevice,
                             ctx_.stream()),
             where_);
  ctx_.Check(cudaMemcpyAsync(call_c0_.get(), state_c_.get(), bytes, cudaMemcpyDeviceToDevice,
                             ctx_.stream()),
             where_);
  path_->Forward(batch, x.data, y.data, ctx.params->device_value(kernel_).data(),
                 ctx.params->device_value(bias_).data());
}

void Lstm::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                    const nn::Matrix& dy, const nn::Matrix* dx) {
  if (!CheckBatch(x.rows)) return;
  path_->Backward(static_cast<int>(x.rows), x.data, y.data, dy.data,
                  dx != nullptr ? dx->data : nullptr, ctx.params->device_value(kernel_).data(),
                  ctx.params->device_grad(kernel_).data(), ctx.params->device_grad(bias_).data());
}

}  // namespace psflow::cuda
