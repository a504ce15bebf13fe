#include "worker/backend/cpu/activation.h"

#include "worker/backend/cpu/vector_math.h"

namespace psflow::cpu {

absl::StatusOr<nn::Shape> Activation::Build(const nn::Shape& input, const nn::BuildContext&) {
  return input;
}

namespace {

PSFLOW_VECTOR_CLONES
void Apply(nn::ActivationKind kind, const float* in, int64_t n, float* out) {
  switch (kind) {
    case nn::ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) out[i] = Sigmoid(in[i]);
      break;
    case nn::ActivationKind::kRelu:
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
      break;
    case nn::ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) out[i] = Tanh(in[i]);
      break;
  }
}

}  // namespace

void Activation::Forward(const nn::RunContext&, const nn::Matrix& x, const nn::Matrix& y) {
  Apply(kind_, x.data, x.size(), y.data);
}

void Activation::Backward(const nn::RunContext&, const nn::Matrix&, const nn::Matrix& y,
                          const nn::Matrix& dy, const nn::Matrix* dx) {
  if (dx == nullptr) return;
  const int64_t n = y.size();
  const float* out = y.data;
  const float* g = dy.data;
  float* d = dx->data;
  switch (kind_) {
    case nn::ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) d[i] = g[i] * out[i] * (1.0f - out[i]);
      break;
    case nn::ActivationKind::kRelu:
      for (int64_t i = 0; i < n; ++i) d[i] = out[i] > 0.0f ? g[i] : 0.0f;
      break;
    case nn::ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) d[i] = g[i] * (1.0f - out[i] * out[i]);
      break;
  }
}

}  // namespace psflow::cpu
