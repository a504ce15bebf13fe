// One LSTM layer over a whole sequence on the CPU (TensorFlow's BasicLSTMCell semantics, see
// LstmSpec). The input part of every gate for all time steps is one sgemm; each step then adds
// h_{t-1} * W_h (one sgemm of [batch, units] x [units, 4 units]) and applies the cell. Backward
// runs the steps in reverse, then forms dW with two large sgemms over all steps.
#ifndef PSFLOW_WORKER_BACKEND_CPU_LSTM_H_
#define PSFLOW_WORKER_BACKEND_CPU_LSTM_H_

#include <vector>

#include "worker/backend/cpu/thread_pool.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Lstm final : public nn::Layer {
 public:
  // Each step's cell is split over `pool` by examples when a step holds enough of them.
  Lstm(const nn::LstmSpec& spec, std::string name, ThreadPool* pool = nullptr)
      : Layer(std::move(name)), spec_(spec), pool_(pool) {}

  // Input [time, in], output [time, units].
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;
  void ResetState() override;
  void RewindState() override;

 private:
  int64_t call_rows_ = 0;  // the last Forward's batch
  int64_t steps_ = 0;      // time
  int64_t in_ = 0;
  int64_t units_ = 0;
  nn::LstmSpec spec_;
  ThreadPool* pool_;
  nn::ParameterSet::Handle kernel_ = -1;
  nn::ParameterSet::Handle bias_ = -1;
  // [batch, time, 4 units]: gate activations sigmoid(i), tanh(j), sigmoid(f + bias), sigmoid(o)
  // after Forward; their pre-activation gradients during Backward.
  std::vector<float> gates_;
  std::vector<float> cells_;    // [batch, time, units]: c_t
  std::vector<float> h_prev_;   // [batch, time, units]: h_{t-1} (Backward's dW_h operand)
  std::vector<float> state_c_;  // [batch, units]: carried into the next call
  std::vector<float> state_h_;
  std::vector<float> call_c0_;  // [batch, units]: this call's initial state
  std::vector<float> call_h0_;
  std::vector<float> dh_next_;  // [batch, units]
  std::vector<float> dc_next_;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_LSTM_H_
