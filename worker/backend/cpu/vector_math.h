// exp, sigmoid and tanh for the CPU backend's element-wise loops: branch-free arithmetic that GCC
// vectorises (libm's expf and tanhf are calls, one element at a time), for loops compiled as
// PSFLOW_VECTOR_CLONES (core/vector_clones.h). Files using them compile with -fno-trapping-math
// (worker/CMakeLists.txt): without it GCC keeps the clamps as branches.
//
// Accuracy (vector_math_test): Exp within 2 ulp of expf on [-87, 88] (0 below -87.3, clamped
// to exp(88.3) above); Sigmoid and Tanh within 2e-7 absolute of the double-precision values.
#ifndef PSFLOW_WORKER_BACKEND_CPU_VECTOR_MATH_H_
#define PSFLOW_WORKER_BACKEND_CPU_VECTOR_MATH_H_

#include <algorithm>
#include <bit>
#include <cstdint>

#include "core/vector_clones.h"

namespace psflow::cpu {

// e^x: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, Cody and Waite), e^r by Cephes'
// degree-7 polynomial, 2^n written into the exponent bits.
inline float Exp(float x) {
  x = x < -87.33f ? -87.33f : x;  // ternaries, not std::min/max: GCC vectorises these
  x = x > 88.3f ? 88.3f : x;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * 1.44269504088896341f + kRound;
  const float n = t - kRound;
  const int32_t exponent = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((exponent + 127) << 23);
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + Exp(-x)); }

// 1 - 2 / (e^2x + 1): exact at the saturated ends, an absolute error of an ulp of 1 near 0.
inline float Tanh(float x) { return 1.0f - 2.0f / (Exp(2.0f * x) + 1.0f); }

// Array kernels over n floats, compiled as PSFLOW_VECTOR_CLONES.
float MaxOf(const float* v, int64_t n);  // n >= 1
// out[i] = Exp(v[i] - shift); out may be v.
void ExpOf(const float* v, int64_t n, float shift, float* out);
// The sum, accumulated in double.
double SumOf(const float* v, int64_t n);
// The sum of Exp(v[i] - shift), accumulated in double.
double SumOfExp(const float* v, int64_t n, float shift);
// sums[k] += rows[r * n + k] for r < count, k < n: a bias's gradient from its output's.
void AddColumnSums(const float* rows, int64_t count, int64_t n, float* sums);

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_VECTOR_MATH_H_
