// The LSTM's hand-written path (see lstm_path.h): the CPU layer's algorithm
// (worker/backend/cpu/lstm.cc) with cuBLAS for the products and one fused kernel per step for
// the cell. Few, small launches: the path for small configurations, where launch overhead
// dominates.
//
// Forward: gates = x W_x for all steps in one GEMM; per step t, gates_t += h_{t-1} W_h (one GEMM
// whose operand h_{t-1} is row t-1 of every example's output, leading dimension time * units) and
// one cell kernel (bias, nonlinearities, c_t, h_t). Backward: per step in reverse, one cell
// kernel (pre-activation gradients, dc) and one GEMM dh_{t-1} = d_gates_t W_h^T; then dW_x, dW_h
// and dx in one GEMM each over all steps and a column sum for db.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "worker/backend/cuda/context.h"
#include "worker/backend/cuda/cublas_util.h"
#include "worker/backend/cuda/kernels.h"
#include "worker/backend/cuda/lstm_kernels.h"
#include "worker/backend/cuda/lstm_path.h"

namespace psflow::cuda {
namespace {

class FusedLstm final : public LstmPath {
 public:
  FusedLstm(Context& ctx, const LstmDims& dims, const LstmState& state, std::string where)
      : ctx_(ctx), dims_(dims), state_(state), where_(std::move(where)) {}

  absl::Status Allocate() {
    const int64_t rows = static_cast<int64_t>(dims_.max_batch) * dims_.time;
    const int64_t u = dims_.units;
    if (absl::Status s = AllocateOne(gates_, rows * 4 * u, "gates"); !s.ok()) return s;
    if (absl::Status s = AllocateOne(cells_, rows * u, "cells"); !s.ok()) return s;
    if (absl::Status s = AllocateOne(h_prev_, rows * u, "previous outputs"); !s.ok()) return s;
    if (absl::Status s = AllocateOne(dh_next_, dims_.max_batch * u, "dh"); !s.ok()) return s;
    return AllocateOne(dc_next_, dims_.max_batch * u, "dc");
  }

  const char* name() const override { return "fused"; }

  void Forward(int batch, const float* x, float* y, const float* kernel,
               const float* bias) override {
    const int time = dims_.time, u = dims_.units, g4 = 4 * u, in = dims_.in;
    const int rows = batch * time;
    const int64_t out_stride = static_cast<int64_t>(time) * u;
    const float* w_h = kernel + static_cast<int64_t>(in) * g4;
    float* gates = gates_.get();
    cudaStream_t stream = ctx_.stream();

    // gates = x W_x, all steps at once: [batch * time, 4u]. The bias joins in the cell kernel.
    ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), false, false, rows, g4, in, 1.0f, x,
                            in, kernel, g4, 0.0f, gates, g4),
               where_);
    for (int t = 0; t < time; ++t) {
      // h_{t-1}, c_{t-1}: the initial state, or row t-1 of every example's output and cells.
      const float* h = t == 0 ? state_.call_h0 : y + static_cast<int64_t>(t - 1) * u;
      const int ldh = t == 0 ? u : time * u;
      const float* c_prev =
          t == 0 ? state_.call_c0 : cells_.get() + static_cast<int64_t>(t - 1) * u;
      const int64_t c_prev_stride = t == 0 ? u : out_stride;
      float* g_t = gates + static_cast<int64_t>(t) * g4;
      ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), false, false, batch, g4, u, 1.0f,
                              h, ldh, w_h, g4, 1.0f, g_t, time * g4),
                 where_);
      LaunchLstmCellForward(g_t, static_cast<int64_t>(time) * g4, bias, c_prev, c_prev_stride,
                            cells_.get() + static_cast<int64_t>(t) * u,
                            y + static_cast<int64_t>(t) * u, out_stride, batch, u,
                            dims_.forget_bias, stream);
      ctx_.CheckLaunch(where_);
    }
    // The final state (row time-1 of every example) starts the next call.
    const size_t row_bytes = static_cast<size_t>(u) * sizeof(float);
    const size_t pitch = static_cast<size_t>(out_stride) * sizeof(float);
    const int64_t last = static_cast<int64_t>(time - 1) * u;
    ctx_.Check(cudaMemcpy2DAsync(state_.state_h, row_bytes, y + last, pitch, row_bytes,
                                 static_cast<size_t>(batch), cudaMemcpyDeviceToDevice, stream),
               where_);
    ctx_.Check(cudaMemcpy2DAsync(state_.state_c, row_bytes, cells_.get() + last, pitch, row_bytes,
                                 static_cast<size_t>(batch), cudaMemcpyDeviceToDevice, stream),
               where_);
  }

  void Backward(int batch, const float* x, const float* y, const float* dy, float* dx,
                const float* kernel, float* d_kernel, float* d_bias) override {
    const int time = dims_.time, u = dims_.units, g4 = 4 * u, in = dims_.in;
    const int rows = batch * time;
    const int64_t out_stride = static_cast<int64_t>(time) * u;
    const float* w_h = kernel + static_cast<int64_t>(in) * g4;
    float* gates = gates_.get();
    cudaStream_t stream = ctx_.stream();
    const size_t state_bytes = static_cast<size_t>(batch) * u * sizeof(float);
    ctx_.Check(cudaMemsetAsync(dh_next_.get(), 0, state_bytes, stream), where_);
    ctx_.Check(cudaMemsetAsync(dc_next_.get(), 0, state_bytes, stream), where_);

    for (int t = time - 1; t >= 0; --t) {
      const float* c_prev =
          t == 0 ? state_.call_c0 : cells_.get() + static_cast<int64_t>(t - 1) * u;
      const int64_t c_prev_stride = t == 0 ? u : out_stride;
      float* g_t = gates + static_cast<int64_t>(t) * g4;
      LaunchLstmCellBackward(g_t, static_cast<int64_t>(time) * g4,
                             cells_.get() + static_cast<int64_t>(t) * u, c_prev, c_prev_stride,
                             dy + static_cast<int64_t>(t) * u, out_stride, dh_next_.get(),
                             dc_next_.get(), batch, u, stream);
      ctx_.CheckLaunch(where_);
      // dh_{t-1} = d_gates_t W_h^T [batch, u]. Not at t = 0: the initial state gets no gradient.
      if (t > 0) {
        ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), false, true, batch, u, g4, 1.0f,
                                g_t, time * g4, w_h, g4, 0.0f, dh_next_.get(), u),
                   where_);
      }
    }

    // h_{t-1} for every step as the rows of one matrix [batch, time, u]: the initial state, then
    // each example's outputs but the last. dW_h is then one product.
    const size_t row_bytes = static_cast<size_t>(u) * sizeof(float);
    const size_t pitch = static_cast<size_t>(out_stride) * sizeof(float);
    ctx_.Check(cudaMemcpy2DAsync(h_prev_.get(), pitch, state_.call_h0, row_bytes, row_bytes,
                                 static_cast<size_t>(batch), cudaMemcpyDeviceToDevice, stream),
               where_);
    if (time > 1) {
      ctx_.Check(cudaMemcpy2DAsync(h_prev_.get() + u, pitch, y, pitch,
                                   static_cast<size_t>(time - 1) * row_bytes,
                                   static_cast<size_t>(batch), cudaMemcpyDeviceToDevice, stream),
                 where_);
    }
    // dW_x += x^T d_gates; dW_h += h_prev^T d_gates; db += column sums; dx = d_gates W_x^T.
    ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), true, false, in, g4, rows, 1.0f, x,
                            in, gates, g4, 1.0f, d_kernel, g4),
               where_);
    ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), true, false, u, g4, rows, 1.0f,
                            h_prev_.get(), u, gates, g4, 1.0f,
                            d_kernel + static_cast<int64_t>(in) * g4, g4),
               where_);
    LaunchColumnSums(gates, d_bias, rows, g4, stream);
    ctx_.CheckLaunch(where_);
    if (dx != nullptr) {
      ctx_.Check(RowMajorGemm(ctx_.cublas(), ctx_.gemm_compute(), false, true, rows, in, g4, 1.0f,
                              gates, g4, kernel, g4, 0.0f, dx, in),
                 where_);
    }
  }

 private:
  absl::Status AllocateOne(DeviceArray<float>& buffer, int64_t count, absl::string_view what) {
    absl::StatusOr<DeviceArray<float>> a =
        ctx_.Allocate<float>(count, absl::StrCat(where_, ": fused path's ", what));
    if (!a.ok()) return a.status();
    buffer = *std::move(a);
    return absl::OkStatus();
  }

  Context& ctx_;
  const LstmDims dims_;
  const LstmState state_;
  const std::string where_;
  // [max_batch, time, 4u]: the gate activations after Forward, their pre-activation gradients
  // during Backward (as the CPU layer's gates_).
  DeviceArray<float> gates_;
  DeviceArray<float> cells_;    // [max_batch, time, u]: c_t
  DeviceArray<float> h_prev_;   // [max_batch, time, u]: h_{t-1} (Backward's dW_h operand)
  DeviceArray<float> dh_next_;  // [max_batch, u]
  DeviceArray<float> dc_next_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LstmPath>> MakeFusedLstmPath(Context& ctx, const LstmDims& dims,
                                                            const LstmState& state,
                                                            std::string where) {
  auto path = std::make_unique<FusedLstm>(ctx, dims, state, std::move(where));
  if (absl::Status s = path->Allocate(); !s.ok()) return s;
  return path;
}

}  // namespace psflow::cuda
