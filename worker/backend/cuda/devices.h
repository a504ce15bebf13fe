// Whether this worker binary carries the CUDA backend. Compiled with nvcc when the build found
// CUDA (PSFLOW_HAVE_CUDA); otherwise a CPU-only stand-in. Device discovery and the GPU kernels
// come with the GPU backend; nothing here touches the CUDA driver.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_DEVICES_H_
#define PSFLOW_WORKER_BACKEND_CUDA_DEVICES_H_

#include <string>

namespace psflow::cuda {

// True when the CUDA backend is compiled into this binary.
bool CompiledIn();

// One line for the start-up log: "CUDA 13.0 compiled in (sm_80, sm_90)" or
// "CUDA not compiled in (CPU backend only)".
std::string BuildInfo();

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_DEVICES_H_
