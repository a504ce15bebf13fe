#include "worker/backend/cpu/lstm.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psflow::cpu {
namespace {

float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace

absl::StatusOr<nn::Shape> Lstm::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  if (spec_.units < 1) return absl::InvalidArgumentError("lstm units must be >= 1");
  if (input.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("lstm expects [time, features] per example, got ", input.size(), " dims"));
  }
  steps_ = input[0];
  in_ = input[1];
  units_ = spec_.units;
  kernel_ =
      ctx.params->Declare(absl::StrCat(name(), "/kernel"), {in_ + units_, 4 * units_}, spec_.init);
  bias_ = ctx.params->Declare(absl::StrCat(name(), "/bias"), {4 * units_}, spec_.init);
  const auto b = static_cast<size_t>(ctx.max_batch), t = static_cast<size_t>(steps_),
             u = static_cast<size_t>(units_);
  gates_.assign(b * t * 4 * u, 0.0f);
  cells_.assign(b * t * u, 0.0f);
  h_prev_.assign(b * t * u, 0.0f);
  for (auto* v : {&state_c_, &state_h_, &call_c0_, &call_h0_, &dh_next_, &dc_next_}) {
    v->assign(b * u, 0.0f);
  }
  return nn::Shape{steps_, units_};
}

void Lstm::ResetState() {
  std::fill(state_c_.begin(), state_c_.end(), 0.0f);
  std::fill(state_h_.begin(), state_h_.end(), 0.0f);
}

void Lstm::RewindState() {
  std::copy_n(call_c0_.begin(), call_rows_ * units_, state_c_.begin());
  std::copy_n(call_h0_.begin(), call_rows_ * units_, state_h_.begin());
}

void Lstm::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  const int batch = static_cast<int>(x.rows), time = static_cast<int>(steps_),
            u = static_cast<int>(units_), g4 = 4 * u, in = static_cast<int>(in_);
  const float* kernel = ctx.params->value(kernel_).data();
  const float* w_h = kernel + static_cast<int64_t>(in) * g4;
  const float* bias = ctx.params->value(bias_).data();
  float* gates = gates_.data();
  std::copy_n(state_c_.begin(), batch * u, call_c0_.begin());
  std::copy_n(state_h_.begin(), batch * u, call_h0_.begin());
  call_rows_ = batch;

  // gates = broadcast(bias) + x * W_x, all steps at once: [batch * time, 4u].
  const int rows = batch * time;
  for (int r = 0; r < rows; ++r) std::copy(bias, bias + g4, gates + static_cast<int64_t>(r) * g4);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, g4, in, 1.0f, x.data, in, kernel, g4,
              1.0f, gates, g4);

  const float forget_bias = spec_.forget_bias;
  for (int t = 0; t < time; ++t) {
    // h_{t-1}: the initial state, or row t-1 of every example's output.
    const float* h = t == 0 ? call_h0_.data() : y.data + static_cast<int64_t>(t - 1) * u;
    const int ldh = t == 0 ? u : time * u;
    float* g_t = gates + static_cast<int64_t>(t) * g4;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, g4, u, 1.0f, h, ldh, w_h, g4,
                1.0f, g_t, time * g4);
    for (int b = 0; b < batch; ++b) {
      float* g = g_t + static_cast<int64_t>(b) * time * g4;
      const float* c_prev = t == 0 ? call_c0_.data() + static_cast<int64_t>(b) * u
                                   : cells_.data() + (static_cast<int64_t>(b) * time + t - 1) * u;
      float* c = cells_.data() + (static_cast<int64_t>(b) * time + t) * u;
      float* h_out = y.data + (static_cast<int64_t>(b) * time + t) * u;
      for (int k = 0; k < u; ++k) {
        const float i = Sigmoid(g[k]), j = std::tanh(g[u + k]);
        const float f = Sigmoid(g[2 * u + k] + forget_bias), o = Sigmoid(g[3 * u + k]);
        g[k] = i;
        g[u + k] = j;
        g[2 * u + k] = f;
        g[3 * u + k] = o;
        c[k] = c_prev[k] * f + i * j;
        h_out[k] = std::tanh(c[k]) * o;
      }
    }
  }
  // The final state starts the next call.
  for (int b = 0; b < batch; ++b) {
    const int64_t last = (static_cast<int64_t>(b) * time + time - 1) * u;
    std::copy_n(cells_.begin() + last, u, state_c_.begin() + static_cast<int64_t>(b) * u);
    std::copy_n(y.data + last, u, state_h_.begin() + static_cast<int64_t>(b) * u);
  }
}

void Lstm::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                    const nn::Matrix& dy, const nn::Matrix* dx) {
  const int batch = static_cast<int>(x.rows), time = static_cast<int>(steps_),
            u = static_cast<int>(units_), g4 = 4 * u, in = static_cast<int>(in_);
  const float* kernel = ctx.params->value(kernel_).data();
  const float* w_h = kernel + static_cast<int64_t>(in) * g4;
  float* d_kernel = ctx.params->grad(kernel_).data();
  float* d_bias = ctx.params->grad(bias_).data();
  float* gates = gates_.data();
  std::fill_n(dh_next_.begin(), batch * u, 0.0f);
  std::fill_n(dc_next_.begin(), batch * u, 0.0f);

  for (int t = time - 1; t >= 0; --t) {
    for (int b = 0; b < batch; ++b) {
      const int64_t row = static_cast<int64_t>(b) * time + t;
      float* g = gates + row * g4;
      const float* c = cells_.data() + row * u;
      const float* c_prev = t == 0 ? call_c0_.data() + static_cast<int64_t>(b) * u : c - u;
      const float* d_out = dy.data + row * u;
      float* dh_next = dh_next_.data() + static_cast<int64_t>(b) * u;
      float* dc_next = dc_next_.data() + static_cast<int64_t>(b) * u;
      for (int k = 0; k < u; ++k) {
        const float i = g[k], j = g[u + k], f = g[2 * u + k], o = g[3 * u + k];
        const float tc = std::tanh(c[k]);
        const float dh = d_out[k] + dh_next[k];
        const float dc = dh * o * (1.0f - tc * tc) + dc_next[k];
        dc_next[k] = dc * f;
        g[k] = dc * j * i * (1.0f - i);
        g[u + k] = dc * i * (1.0f - j * j);
        g[2 * u + k] = dc * c_prev[k] * f * (1.0f - f);
        g[3 * u + k] = dh * tc * o * (1.0f - o);
      }
    }
    // dh_{t-1} = d_gates_t * W_h^T   [batch, u]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, u, g4, 1.0f,
                gates + static_cast<int64_t>(t) * g4, time * g4, w_h, g4, 0.0f, dh_next_.data(), u);
  }

  // h_{t-1} for every step, as rows of one matrix, for dW_h in one product.
  for (int b = 0; b < batch; ++b) {
    float* dst = h_prev_.data() + static_cast<int64_t>(b) * time * u;
    std::copy_n(call_h0_.begin() + static_cast<int64_t>(b) * u, u, dst);
    std::copy_n(y.data + static_cast<int64_t>(b) * time * u, (time - 1) * u, dst + u);
  }
  const int rows = batch * time;
  // dW_x += x^T * d_gates; dW_h += h_prev^T * d_gates; db += column sums.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, g4, rows, 1.0f, x.data, in, gates, g4,
              1.0f, d_kernel, g4);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, u, g4, rows, 1.0f, h_prev_.data(), u, gates,
              g4, 1.0f, d_kernel + static_cast<int64_t>(in) * g4, g4);
  for (int r = 0; r < rows; ++r) {
    const float* g = gates + static_cast<int64_t>(r) * g4;
    for (int k = 0; k < g4; ++k) d_bias[k] += g[k];
  }
  if (dx != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, in, g4, 1.0f, gates, g4, kernel, g4,
                0.0f, dx->data, in);
  }
}

}  // namespace psflow::cpu
