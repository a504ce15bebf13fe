#include <cuda_runtime_api.h>

#include <string>

#include "worker/backend/cuda/devices.h"

namespace psflow::cuda {

bool CompiledIn() { return true; }

std::string BuildInfo() {
  return "CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + " compiled in";
}

}  // namespace psflow::cuda
