// Softmax cross-entropy on the CPU, numerically stable (logits shifted by their row maximum).
#ifndef PSFLOW_WORKER_BACKEND_CPU_SOFTMAX_CROSS_ENTROPY_H_
#define PSFLOW_WORKER_BACKEND_CPU_SOFTMAX_CROSS_ENTROPY_H_

#include "worker/nn/layer.h"

namespace psflow::cpu {

class SoftmaxCrossEntropy final : public nn::SoftmaxCrossEntropy {
 public:
  double ForwardBackward(const nn::Matrix& logits, const int32_t* labels, float scale,
                         const nn::Matrix& dlogits) override;
  Eval Evaluate(const nn::Matrix& logits, const int32_t* labels) override;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_SOFTMAX_CROSS_ENTROPY_H_
