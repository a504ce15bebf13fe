// The optimizer's update on the GPU (nn::ParameterUpdate, made by the CUDA backend's
// MakeUpdate): the slots live in device memory beside the parameter mirror, and each step is one
// kernel launch (update_kernels.h) over a table of tiles: the dense parameters' runs, fixed at
// creation and kept on the device, then the step's touched rows of sparse parameters, copied up
// from pinned host memory with the launch. Nothing is allocated per step.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_DEVICE_UPDATE_H_
#define PSFLOW_WORKER_BACKEND_CUDA_DEVICE_UPDATE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/optimizer.h"
#include "worker/backend/cuda/context.h"
#include "worker/nn/parameter_update.h"

namespace psflow::cuda {

// params must be attached to the backend of `ctx` (its device mirror exists); `optimizer` and
// `ctx` must outlive the update. RESOURCE_EXHAUSTED when the device has no room for the slots
// and tile tables; UNIMPLEMENTED for an optimizer name the device has no rule for.
absl::StatusOr<std::unique_ptr<nn::ParameterUpdate>> MakeDeviceUpdate(
    Context& ctx, const Optimizer& optimizer, const nn::ParameterSet& params);

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_DEVICE_UPDATE_H_
