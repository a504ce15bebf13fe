// Update rules the ps applies to a variable given a gradient. Only SGD exists so far; momentum,
// Adagrad, Adam and RMSProp (with slots) implement the same interface.
#ifndef PSFLOW_PS_OPTIMIZER_H_
#define PSFLOW_PS_OPTIMIZER_H_

#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace psflow {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // var -= update(grad). Thread-safe for distinct variables; the caller serialises calls on the
  // same variable.
  virtual void Apply(std::span<float> var, std::span<const float> grad) = 0;
};

// INVALID_ARGUMENT for an unknown name or a learning rate that is not > 0.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::OptimizerConfig& config);

}  // namespace psflow

#endif  // PSFLOW_PS_OPTIMIZER_H_
