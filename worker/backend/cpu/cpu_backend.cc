// The CPU backend: OpenBLAS for matrix products (blas.h), psflow's loops elsewhere, both split
// over one pool of threads per backend (gemm.h, thread_pool.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "worker/backend/cpu/activation.h"
#include "worker/backend/cpu/blas.h"
#include "worker/backend/cpu/conv2d.h"
#include "worker/backend/cpu/dense.h"
#include "worker/backend/cpu/dropout.h"
#include "worker/backend/cpu/embedding.h"
#include "worker/backend/cpu/flatten.h"
#include "worker/backend/cpu/lrn.h"
#include "worker/backend/cpu/lstm.h"
#include "worker/backend/cpu/max_pool.h"
#include "worker/backend/cpu/softmax_cross_entropy.h"
#include "worker/backend/cpu/thread_pool.h"
#include "worker/nn/backend.h"

namespace psflow::nn {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}

  Device device() const override { return Device::kCpu; }

  absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerSpec& spec,
                                                   std::string name) override {
    using Made = absl::StatusOr<std::unique_ptr<Layer>>;
    return std::visit(Overloaded{
                          [&](const DenseSpec& s) -> Made {
                            return std::make_unique<cpu::Dense>(s, std::move(name), &pool_);
                          },
                          [&](const ActivationSpec& s) -> Made {
                            return std::make_unique<cpu::Activation>(s, std::move(name));
                          },
                          [&](const Conv2DSpec& s) -> Made {
                            return std::make_unique<cpu::Conv2D>(s, std::move(name), &pool_);
                          },
                          [&](const MaxPoolSpec& s) -> Made {
                            return std::make_unique<cpu::MaxPool>(s, std::move(name), &pool_);
                          },
                          [&](const LrnSpec& s) -> Made {
                            return std::make_unique<cpu::Lrn>(s, std::move(name), &pool_);
                          },
                          [&](const FlattenSpec&) -> Made {
                            return std::make_unique<cpu::Flatten>(std::move(name));
                          },
                          [&](const DropoutSpec& s) -> Made {
                            return std::make_unique<cpu::Dropout>(s, std::move(name));
                          },
                          [&](const EmbeddingSpec& s) -> Made {
                            return std::make_unique<cpu::Embedding>(s, std::move(name));
                          },
                          [&](const LstmSpec& s) -> Made {
                            return std::make_unique<cpu::Lstm>(s, std::move(name), &pool_);
                          },
                      },
                      spec);
  }

  std::unique_ptr<SoftmaxCrossEntropy> MakeSoftmaxCrossEntropy() override {
    return std::make_unique<cpu::SoftmaxCrossEntropy>(&pool_);
  }

  void CopyToDevice(const float* host, float* device, int64_t floats) override {
    if (floats > 0) std::memcpy(device, host, static_cast<size_t>(floats) * sizeof(float));
  }

 protected:
  float* AllocateRaw(int64_t floats) override {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(floats, 16)) * sizeof(float);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) return nullptr;  // Model::Create names the buffer
    std::memset(p, 0, bytes);
    return static_cast<float*>(p);
  }
  void Free(float* p) const override { std::free(p); }

 private:
  cpu::ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::make_unique<CpuBackend>(std::min(threads, kMaxCpuThreads));
}

std::string CpuKernels() { return cpu::blas::Describe(); }

}  // namespace psflow::nn
