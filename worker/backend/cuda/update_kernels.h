// The update rules of core/optimizer.h on the device, fused: one launch updates every run of the
// parameter buffer a step changes (the dense parameters, the touched rows of sparse ones), each
// block one tile of it. The arithmetic is the CPU loops' operation for operation: every product
// and sum rounded on its own (no fused multiply-add), IEEE division and square root, denormals
// flushed (update_kernels.cu compiles with -ftz=true, as the CPU updates run with FTZ/DAZ), so
// the same inputs give the same bits as core/optimizer.cc.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_UPDATE_KERNELS_H_
#define PSFLOW_WORKER_BACKEND_CUDA_UPDATE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace psflow::cuda {

enum class UpdateRule { kSgd, kMomentum, kNesterov, kAdagrad, kAdam, kRmsProp, kCenteredRmsProp };

// The step's scalars, computed on the host as core/optimizer.cc computes them.
struct UpdateScalars {
  float learning_rate = 0;    // Adam: the bias-corrected rate of this step (AdamStepSize)
  float momentum = 0;         // momentum, Nesterov, RMSProp
  float lr_momentum = 0;      // Nesterov: learning_rate * momentum, rounded to float
  float epsilon = 0;          // Adagrad, Adam, RMSProp
  float beta1 = 0;            // Adam; RMSProp's decay rho
  float one_minus_beta1 = 0;  // (float)(1 - (double)beta1)
  float beta2 = 0;            // Adam
  float one_minus_beta2 = 0;
};

// Elements [offset, offset + length) of the buffers: one block's work.
struct UpdateTile {
  int64_t offset;
  int64_t length;
};
// Runs are cut into tiles of at most this many elements (16 per thread).
inline constexpr int64_t kUpdateTileElements = 4096;

// For each tile t of tiles[0, num_tiles) (device memory) and each element i in it: var[i] and
// its slots (slot0..2: the optimizer's slots in Optimizer::slot_name order, null where it has
// fewer) updated by grad[i] under `rule`.
void LaunchUpdate(UpdateRule rule, const UpdateScalars& s, const UpdateTile* tiles,
                  int64_t num_tiles, float* var, const float* grad, float* slot0, float* slot1,
                  float* slot2, cudaStream_t stream);

// x[i] = value for i in [0, n): a slot's initial value.
void LaunchFill(float* x, int64_t n, float value, cudaStream_t stream);

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_UPDATE_KERNELS_H_
