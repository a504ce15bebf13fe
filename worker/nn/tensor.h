// Non-owning views of float buffers, on the host or (later) a GPU.
#ifndef PSFLOW_WORKER_NN_TENSOR_H_
#define PSFLOW_WORKER_NN_TENSOR_H_

#include <cstdint>
#include <span>
#include <vector>

namespace psflow::nn {

// Dimensions, outermost first. A layer's per-example shape leaves out the batch dimension.
using Shape = std::vector<int64_t>;

inline int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
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
