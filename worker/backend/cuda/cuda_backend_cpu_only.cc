// The build found no CUDA toolkit: asking for the GPU backend is a clear error.
#include "worker/nn/backend.h"

namespace psflow::nn {

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int /*device*/, Precision /*precision*/) {
  return absl::FailedPreconditionError(
      "this psflow-worker was built without CUDA (no nvcc at build time): use --device=cpu, or "
      "rebuild where the CUDA toolkit is installed");
}

}  // namespace psflow::nn
