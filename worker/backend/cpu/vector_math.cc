#include "worker/backend/cpu/vector_math.h"

namespace psflow::cpu {

// Eight independent lanes: GCC vectorises these without -ffast-math's reassociation.
PSFLOW_VECTOR_CLONES
float MaxOf(const float* v, int64_t n) {
  float lanes[8];
  for (float& l : lanes) l = v[0];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] = lanes[k] < v[i + k] ? v[i + k] : lanes[k];
  }
  for (; i < n; ++i) lanes[0] = lanes[0] < v[i] ? v[i] : lanes[0];
  float max = lanes[0];
  for (float l : lanes) max = max < l ? l : max;
  return max;
}

PSFLOW_VECTOR_CLONES
void ExpOf(const float* v, int64_t n, float shift, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Exp(v[i] - shift);
}

PSFLOW_VECTOR_CLONES
double SumOf(const float* v, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += v[i + k];
  }
  for (; i < n; ++i) lanes[0] += v[i];
  double sum = 0;
  for (double l : lanes) sum += l;
  return sum;
}

PSFLOW_VECTOR_CLONES
double SumOfExp(const float* v, int64_t n, float shift) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += Exp(v[i + k] - shift);
  }
  for (; i < n; ++i) lanes[0] += Exp(v[i] - shift);
  double sum = 0;
  for (double l : lanes) sum += l;
  return sum;
}

PSFLOW_VECTOR_CLONES
void AddColumnSums(const float* rows, int64_t count, int64_t n, float* sums) {
  for (int64_t r = 0; r < count; ++r) {
    const float* row = rows + r * n;
    for (int64_t k = 0; k < n; ++k) sums[k] += row[k];
  }
}

}  // namespace psflow::cpu
