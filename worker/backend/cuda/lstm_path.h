// The implementations behind cuda::Lstm (lstm.h), one interface: "fused" (lstm_fused.cc:
// cuBLAS products and psflow's fused cell kernel, step by step) and "cudnn" / "cudnn_persistent"
// (lstm_cudnn.cc: cuDNN's RNN API, standard or persistent-static algorithm). Internal to the layer;
// not a Layer itself.
//
// Contract of a path, for `batch` <= max_batch rows:
//   Forward reads the call's initial state (LstmState::call_h0/call_c0, which the layer filled)
//   and writes y [batch, time, units] and the final state (state_h/state_c), keeping what its
//   Backward needs.
//   Backward follows the Forward of the same batch: it ADDS the parameter gradients into
//   d_kernel/d_bias and WRITES dx (dx may be null); no gradient flows into the initial state
//   (truncated backpropagation, as the CPU layer).
// Parameters are TensorFlow's: kernel [in + units, 4 units] (rows x then h; gate blocks i, j, f,
// o), bias [4 units]; all pointers are device pointers. Everything runs on the context's stream;
// nothing is allocated after the path is made; errors go to Context::Check.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_LSTM_PATH_H_
#define PSFLOW_WORKER_BACKEND_CUDA_LSTM_PATH_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/backend/cuda/context.h"

namespace psflow::cuda {

struct LstmDims {
  int max_batch = 0;
  int time = 0;
  int in = 0;
  int units = 0;
  float forget_bias = 0.0f;
};

// The carried state, owned by the layer: [max_batch, units] each; a call uses the first rows.
struct LstmState {
  const float* call_h0 = nullptr;  // this call's initial state (the layer copies it in)
  const float* call_c0 = nullptr;
  float* state_h = nullptr;  // the final state, carried into the next call
  float* state_c = nullptr;
};

class LstmPath {
 public:
  virtual ~LstmPath() = default;
  virtual const char* name() const = 0;
  virtual void Forward(int batch, const float* x, float* y, const float* kernel,
                       const float* bias) = 0;
  virtual void Backward(int batch, const float* x, const float* y, const float* dy, float* dx,
                        const float* kernel, float* d_kernel, float* d_bias) = 0;
};

// Allocate everything the path needs for dims.max_batch rows; `where` names the layer and shapes
// in error messages.
absl::StatusOr<std::unique_ptr<LstmPath>> MakeFusedLstmPath(Context& ctx, const LstmDims& dims,
                                                            const LstmState& state,
                                                            std::string where);
// cuDNN's RNN algorithms psflow offers: standard (any size) and persistent-static (the recurrent
// weights kept in the SMs' registers and shared memory across time steps: fast for small hidden
// sizes and batches, refused by cuDNN beyond what fits).
enum class CudnnRnnAlgo { kStandard, kPersistStatic };

// Also fails (and the layer chooses among the other paths) where cuDNN refuses the configuration
// or lays out its weights other than documented. name(): "cudnn" or "cudnn_persistent".
absl::StatusOr<std::unique_ptr<LstmPath>> MakeCudnnLstmPath(Context& ctx, const LstmDims& dims,
                                                            const LstmState& state,
                                                            std::string where, CudnnRnnAlgo algo);

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_LSTM_PATH_H_
