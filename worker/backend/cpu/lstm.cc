#include "worker/backend/cpu/lstm.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/backend/cpu/gemm.h"
#include "worker/backend/cpu/vector_math.h"

namespace psflow::cpu {
namespace {

// A step's cell is split over threads only when each range gets this many gate values: a
// wake-up costs ~10 us, a few thousand values.
constexpr int64_t kCellFloatsPerRange = 16384;

// One example's cell at one step: the gate pre-activations g [4u] become their activations
// i, j, f, o; c = c_prev * f + i * j; h = tanh(c) * o.
PSFLOW_VECTOR_CLONES
void CellForward(int u, float forget_bias, const float* c_prev, float* g, float* c, float* h) {
  for (int k = 0; k < u; ++k) {
    const float i = Sigmoid(g[k]), j = Tanh(g[u + k]);
    const float f = Sigmoid(g[2 * u + k] + forget_bias), o = Sigmoid(g[3 * u + k]);
    g[k] = i;
    g[u + k] = j;
    g[2 * u + k] = f;
    g[3 * u + k] = o;
    c[k] = c_prev[k] * f + i * j;
    h[k] = Tanh(c[k]) * o;
  }
}

// Its backward: g [4u] holds the activations and becomes the pre-activation gradients; dh_next
// and dc_next carry the gradients into the step before.
PSFLOW_VECTOR_CLONES
void CellBackward(int u, const float* c, const float* c_prev, const float* d_out, float* g,
                  const float* dh_next, float* dc_next) {
  for (int k = 0; k < u; ++k) {
    const float i = g[k], j = g[u + k], f = g[2 * u + k], o = g[3 * u + k];
    const float tc = Tanh(c[k]);
    const float dh = d_out[k] + dh_next[k];
    const float dc = dh * o * (1.0f - tc * tc) + dc_next[k];
    dc_next[k] = dc * f;
    g[k] = dc * j * i * (1.0f - i);
    g[u + k] = dc * i * (1.0f - j * j);
    g[2 * u + k] = dc * c_prev[k] * f * (1.0f - f);
    g[3 * u + k] = dh * tc * o * (1.0f - o);
  }
}

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
  Gemm(pool_, blas::kNoTrans, blas::kNoTrans, rows, g4, in, 1.0f, x.data, in, kernel, g4, 1.0f,
       gates, g4);

  const float forget_bias = spec_.forget_bias;
  for (int t = 0; t < time; ++t) {
    // h_{t-1}: the initial state, or row t-1 of every example's output.
    const float* h = t == 0 ? call_h0_.data() : y.data + static_cast<int64_t>(t - 1) * u;
    const int ldh = t == 0 ? u : time * u;
    float* g_t = gates + static_cast<int64_t>(t) * g4;
    Gemm(pool_, blas::kNoTrans, blas::kNoTrans, batch, g4, u, 1.0f, h, ldh, w_h, g4, 1.0f, g_t,
         time * g4);
    const int64_t grain = std::max<int64_t>(1, kCellFloatsPerRange / g4);
    ParallelFor(pool_, batch, grain, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float* c_prev =
            t == 0 ? call_c0_.data() + b * u : cells_.data() + (b * time + t - 1) * u;
        CellForward(u, forget_bias, c_prev, g_t + b * time * g4, cells_.data() + (b * time + t) * u,
                    y.data + (b * time + t) * u);
      }
    });
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

  const int64_t grain = std::max<int64_t>(1, kCellFloatsPerRange / g4);
  for (int t = time - 1; t >= 0; --t) {
    ParallelFor(pool_, batch, grain, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t row = b * time + t;
        const float* c = cells_.data() + row * u;
        const float* c_prev = t == 0 ? call_c0_.data() + b * u : c - u;
        CellBackward(u, c, c_prev, dy.data + row * u, gates + row * g4, dh_next_.data() + b * u,
                     dc_next_.data() + b * u);
      }
    });
    // dh_{t-1} = d_gates_t * W_h^T   [batch, u]
    Gemm(pool_, blas::kNoTrans, blas::kTrans, batch, u, g4, 1.0f,
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
  Gemm(pool_, blas::kTrans, blas::kNoTrans, in, g4, rows, 1.0f, x.data, in, gates, g4, 1.0f,
       d_kernel, g4);
  Gemm(pool_, blas::kTrans, blas::kNoTrans, u, g4, rows, 1.0f, h_prev_.data(), u, gates, g4, 1.0f,
       d_kernel + static_cast<int64_t>(in) * g4, g4);
  AddColumnSums(gates, rows, g4, d_bias);
  if (dx != nullptr) {
    Gemm(pool_, blas::kNoTrans, blas::kTrans, rows, in, g4, 1.0f, gates, g4, kernel, g4, 0.0f,
         dx->data, in);
  }
}

}  // namespace psflow::cpu
