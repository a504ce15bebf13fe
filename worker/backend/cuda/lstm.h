// One LSTM layer over a whole sequence on a GPU, as the CPU layer (worker/backend/cpu/lstm.h):
// TensorFlow's BasicLSTMCell (see nn::LstmSpec), input [time, in] and output [time, units] per
// example (x [batch, time, in] row-major), parameters `<name>/kernel` [in + units, 4 units]
// (rows x then h; gate blocks i, j, f, o) and `<name>/bias` [4 units], both spec.init, and
// forget_bias added to f before its sigmoid. The state (c, h) of each row carries from one call
// to the next until ResetState() (zeros); backpropagation is truncated at the call's start.
//
// Three complete implementations (lstm_path.h): "fused" (cuBLAS GEMMs and one fused cell kernel
// per step; lstm_fused.cc) and "cudnn" / "cudnn_persistent" (cuDNN's RNN API, standard or
// persistent-static algorithm, with TensorFlow's layout packed into cuDNN's weight space each
// step; lstm_cudnn.cc). PSFLOW_LSTM_IMPL=fused|cudnn|cudnn_persistent forces one; otherwise Build
// times a few forward+backward passes of each at max_batch and keeps the fastest (logging the
// choice and every time, and why a cuDNN path was unavailable where cuDNN refused it). Build
// synchronises the GPU while it measures; Forward and Backward allocate nothing and never wait for
// the GPU.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_LSTM_H_
#define PSFLOW_WORKER_BACKEND_CUDA_LSTM_H_

#include <memory>
#include <string>

#include "worker/backend/cuda/context.h"
#include "worker/backend/cuda/lstm_path.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Lstm final : public nn::Layer {
 public:
  Lstm(Context& ctx, const nn::LstmSpec& spec, std::string name);

  // Input [time, in], output [time, units]. INVALID_ARGUMENT for other input ranks or an
  // unknown PSFLOW_LSTM_IMPL; RESOURCE_EXHAUSTED when the GPU is out of memory.
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;
  void ResetState() override;
  void RewindState() override;

  // "fused" or "cudnn" once built.
  const char* implementation() const { return path_ != nullptr ? path_->name() : "none"; }

 private:
  // Builds the paths, times them, keeps the fastest in path_ (fused when cuDNN refuses).
  absl::Status ChooseFastest();
  // "fused", "cudnn" or "cudnn_persistent", for this layer's dims and state.
  absl::StatusOr<std::unique_ptr<LstmPath>> MakePath(absl::string_view name);
  // Milliseconds per forward+backward pass of max_batch rows on zeroed scratch inputs and
  // parameters: ScratchFloats() floats of device memory.
  absl::StatusOr<float> TimePasses(LstmPath& path, float* scratch);
  int64_t ScratchFloats() const;
  bool CheckBatch(int64_t rows);

  Context& ctx_;
  nn::LstmSpec spec_;
  LstmDims dims_;
  std::string where_;
  nn::ParameterSet::Handle kernel_ = -1;
  nn::ParameterSet::Handle bias_ = -1;
  DeviceArray<float> state_h_;  // [max_batch, units]: carried into the next call
  DeviceArray<float> state_c_;
  DeviceArray<float> call_h0_;  // [max_batch, units]: this call's initial state
  DeviceArray<float> call_c0_;
  int call_rows_ = 0;  // the last Forward's batch
  std::unique_ptr<LstmPath> path_;
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_LSTM_H_
