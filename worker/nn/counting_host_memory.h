// For tests: host memory (ParameterSet::MoveHostBuffersTo) that gives at most `capacity` buffers
// and knows which it gave, as a GPU's pinned memory would be had where there is no GPU. Fails the
// test when a buffer it did not give comes back, or when one it gave never does.
#ifndef PSFLOW_WORKER_NN_COUNTING_HOST_MEMORY_H_
#define PSFLOW_WORKER_NN_COUNTING_HOST_MEMORY_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>

#include "worker/nn/parameter_set.h"

namespace psflow::nn {

class CountingHostMemory final : public HostMemory {
 public:
  explicit CountingHostMemory(int capacity) : capacity_(capacity) {}
  ~CountingHostMemory() override {
    EXPECT_TRUE(given.empty()) << given.size() << " buffer(s) never returned";
  }
  float* Allocate(size_t bytes) const override {
    if (static_cast<int>(given.size()) == capacity_) return nullptr;
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    std::memset(p, 0, bytes);
    given.insert(p);
    return static_cast<float*>(p);
  }
  void Free(float* p) const override {
    EXPECT_EQ(given.erase(p), 1u) << "a buffer this memory did not give";
    std::free(p);
  }
  mutable std::set<void*> given;  // what is out now

 private:
  const int capacity_;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_COUNTING_HOST_MEMORY_H_
