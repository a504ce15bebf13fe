#include <cuda_runtime_api.h>

#include <string>

#include "worker/backend/cuda/devices.h"

namespace psflow::cuda {

bool CompiledIn() { return true; }

std::string BuildInfo() {
  return "CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + " compiled in";
}

std::string PciBusId(int device) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof(id), device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

}  // namespace psflow::cuda
