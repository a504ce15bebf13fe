// A compute backend: makes layers that run on one kind of device and owns that device's memory.
// The CPU backend (OpenBLAS) is the reference; a CUDA backend implements the same interface.
#ifndef PSFLOW_WORKER_NN_BACKEND_H_
#define PSFLOW_WORKER_NN_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::nn {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  // UNIMPLEMENTED when this backend has no kernel for the spec's kind.
  virtual absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerSpec& spec,
                                                           std::string name) = 0;
  virtual std::unique_ptr<SoftmaxCrossEntropy> MakeSoftmaxCrossEntropy() = 0;

  // Device memory for activations: `floats` zeroed floats, freed with the returned owner.
  struct BufferDeleter {
    const Backend* backend;
    void operator()(float* p) const { backend->Free(p); }
  };
  using Buffer = std::unique_ptr<float[], BufferDeleter>;
  Buffer Allocate(int64_t floats) { return Buffer(AllocateRaw(floats), BufferDeleter{this}); }

  // Copies `floats` host floats to device memory (a memcpy on the CPU backend).
  virtual void CopyToDevice(const float* host, float* device, int64_t floats) = 0;

 protected:
  virtual float* AllocateRaw(int64_t floats) = 0;
  virtual void Free(float* p) const = 0;
};

// The OpenBLAS backend. `threads` > 0 sets how many threads OpenBLAS uses (process-wide);
// 0 keeps OpenBLAS's default (one per core). Several workers sharing a machine want 1 each:
// OpenBLAS threads spin while they wait, and compete with the ps and each other.
std::unique_ptr<Backend> MakeCpuBackend(int threads = 0);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_BACKEND_H_
