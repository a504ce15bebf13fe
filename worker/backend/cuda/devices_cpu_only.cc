// The build found no CUDA toolkit: the worker is CPU-only.
#include "worker/backend/cuda/devices.h"

namespace psflow::cuda {

bool CompiledIn() { return false; }
std::string BuildInfo() { return "CUDA not compiled in"; }
std::string PciBusId(int /*device*/) { return ""; }

}  // namespace psflow::cuda
