// Whether this worker binary carries the CUDA backend, and facts about its GPUs. Compiled with
// nvcc when the build found CUDA (PSFLOW_HAVE_CUDA); otherwise a CPU-only stand-in. The GPU
// backend itself is nn::MakeCudaBackend (worker/nn/backend.h).
#ifndef PSFLOW_WORKER_BACKEND_CUDA_DEVICES_H_
#define PSFLOW_WORKER_BACKEND_CUDA_DEVICES_H_

#include <string>

namespace psflow::cuda {

// True when the CUDA backend is compiled into this binary.
bool CompiledIn();

// One line for the start-up log: "CUDA 13.0 compiled in (sm_80, sm_90)" or
// "CUDA not compiled in (CPU backend only)".
std::string BuildInfo();

// The PCI bus id of CUDA device `device` ("0000:3b:00.0"): how NVML finds the same GPU. Empty
// when CUDA is not compiled in or the device does not exist.
std::string PciBusId(int device);

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_DEVICES_H_
