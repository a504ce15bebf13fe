// The plain SGD update, var -= learning_rate * grad: shared by the ps's optimizer and the
// worker's in-process (no-ps) mode so both train identically.
#ifndef PSFLOW_CORE_SGD_H_
#define PSFLOW_CORE_SGD_H_

#include <cassert>
#include <cstddef>
#include <span>

namespace psflow {

inline void SgdUpdate(float learning_rate, std::span<const float> grad, std::span<float> var) {
  assert(grad.size() == var.size());
  const float* __restrict g = grad.data();
  float* __restrict v = var.data();
  const size_t n = var.size();
  for (size_t i = 0; i < n; ++i) v[i] -= learning_rate * g[i];
}

}  // namespace psflow

#endif  // PSFLOW_CORE_SGD_H_
