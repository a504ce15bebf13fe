// Non-owning views of float buffers, on the host or (later) a GPU.
#ifndef PSFLOW_WORKER_NN_TENSOR_H_
#define PSFLOW_WORKER_NN_TENSOR_H_

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace psflow::nn {

// Dimensions, outermost first. A layer's per-example shape leaves out the batch dimension.
using Shape = std::vector<int64_t>;

// The product of the dimensions; INT64_MAX where it would overflow (a shape from a model file is
// checked against its limits after: models/model_check.h).
inline int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

enum class Device { kCpu, kCuda };

// A row-major view: `data` points at rows * cols floats on `device`. For activations, rows is the
// batch size and cols the number of elements per example.
struct Matrix {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  Device device = Device::kCpu;

  int64_t size() const { return rows * cols; }
  std::span<float> span() const { return {data, static_cast<size_t>(size())}; }
  float* row(int64_t r) const { return data + r * cols; }
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_TENSOR_H_
