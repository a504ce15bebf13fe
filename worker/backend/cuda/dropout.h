// Dropout on a GPU, as the CPU layer (worker/backend/cpu/dropout.h). Training: each element kept
// with probability keep_prob and scaled by 1 / keep_prob; inference (and keep_prob 1): a copy.
// The mask is a pure function of (the BuildContext seed, RunContext::step, element index) — the
// CPU layer's hash, so the masks equal the CPU's bit for bit — and Backward recomputes it instead
// of storing it: the same mask as the Forward of the same step. The step reaches the kernel
// through memory, not as an argument: Prepare writes RunContext::step into a pinned word and
// Forward queues its copy into a device word the kernels read, so a recorded step (a graph)
// draws each replay's own mask. Both words are allocated in Build; nothing later.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_DROPOUT_H_
#define PSFLOW_WORKER_BACKEND_CUDA_DROPOUT_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Dropout final : public nn::Layer {
 public:
  Dropout(Context& ctx, const nn::DropoutSpec& spec, std::string name);

  // INVALID_ARGUMENT unless keep_prob is in (0, 1].
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  absl::Status Prepare(const nn::RunContext& ctx, int64_t rows) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  // out = in * mask(*step_) / keep_prob when keep_prob < 1 and `masked`; a copy otherwise.
  void Apply(bool masked, const float* in, float* out, int64_t n);
  bool masks() const { return spec_.keep_prob < 1.0f; }

  struct PinnedFree {
    void operator()(uint64_t* p) const { cudaFreeHost(p); }
  };

  Context& ctx_;
  nn::DropoutSpec spec_;
  uint64_t seed_ = 0;  // the BuildContext's; the launcher mixes it as the CPU layer does
  std::string where_;
  std::unique_ptr<uint64_t, PinnedFree> host_step_;  // pinned: this call's step, from Prepare
  DeviceArray<uint64_t> step_;                       // what the kernels read
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_DROPOUT_H_
