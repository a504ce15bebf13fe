// Update rules applied to a run of variables given its gradient, as TensorFlow 1's optimizers
// (the seeds' framework) define them; the ps applies them to its partitions, a worker training
// alone (worker/local_update.h) to its host copy of the parameters, so both train identically:
//
//   sgd       var -= lr * g
//   momentum  accum = momentum * accum + g;  var -= lr * accum
//             (Nesterov: var -= lr * g + lr * momentum * accum, with the updated accum)
//   adagrad   accum += g^2;  var -= lr * g / (sqrt(accum) + epsilon)   (accum starts at
//             initial_accumulator_value, default 0.1)
//   adam      m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//             var -= lr * sqrt(1-b2^t) / (1-b1^t) * m / (sqrt(v) + epsilon)
//             (t = the 1-based number of this update; defaults b1 0.9, b2 0.999, eps 1e-8)
//   rmsprop   ms = rho ms + (1-rho) g^2;  [centered: mg = rho mg + (1-rho) g; d = ms - mg^2]
//             mom = momentum * mom + lr * g / sqrt(d + epsilon);  var -= mom
//             (ms starts at 1 as in TF1; defaults rho 0.9, momentum 0, epsilon 1e-10)
//
// A sparse gradient (an embedding's: the rows a step read) updates only the rows it names, in every
// mode (a worker alone, an async ps, a sync ps), so a row no step reads keeps its value and slots.
// That is TF1's rule for its sparse momentum, Adagrad and RMSProp ops; for Adam it is TF1's
// LazyAdamOptimizer (TF1's AdamOptimizer decays every row's moments and moves every row, read or
// not). SGD and Adagrad give the same values either way.
//
// Slots (accum, m, v, ms, mom, mg) have the partition's size and are kept beside it, so they are
// partitioned exactly like the variables. An Optimizer is immutable: the learning rate and step
// are arguments, so the chief can change the rate at run time, and one instance serves every
// partition from any thread (the caller serialises updates of the same elements).
#ifndef PSFLOW_CORE_OPTIMIZER_H_
#define PSFLOW_CORE_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "core/flush_denormals.h"
#include "proto/ps.pb.h"

namespace psflow {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The config with defaults filled in (what MakeOptimizer was given, fields left 0 replaced by
  // the defaults above), e.g. for a checkpoint.
  virtual const proto::OptimizerConfig& config() const = 0;

  // Slot tensors per partition element, their names (for checkpoints and logs) and the value
  // each starts at.
  virtual int num_slots() const = 0;
  virtual const char* slot_name(int slot) const = 0;
  virtual float slot_initial_value(int slot) const = 0;

  // One update of var[i] by grad[i], i in [0, var.size()); slots[k][i] is slot k of the same
  // element (slots.size() == num_slots(), every span var.size() long). `step` >= 1 is the number
  // of this update (Adam's bias correction). grad may be any run of a partition: a whole
  // partition, a chunk of it, or one row of a sparse update. Denormal inputs and results are
  // taken as zero (core/flush_denormals.h), so a slot decaying towards zero never slows the
  // update down; the caller's floating-point mode is left as it was.
  void Apply(float learning_rate, int64_t step, std::span<float> var, std::span<const float> grad,
             std::span<const std::span<float>> slots) const {
    ScopedFlushDenormals flush;
    Update(learning_rate, step, var, grad, slots);
  }

 private:
  // Apply's arithmetic, run with denormals flushed.
  virtual void Update(float learning_rate, int64_t step, std::span<float> var,
                      std::span<const float> grad,
                      std::span<const std::span<float>> slots) const = 0;
};

// Adam's learning rate for update number `step` (>= 1): lr * sqrt(1 - beta2^step) / (1 -
// beta1^step), computed in double and rounded once. Every Adam, on the host or a device, takes
// its step size from here.
float AdamStepSize(float learning_rate, int64_t step, float beta1, float beta2);

// (float)(1 - (double)beta): the complement every rule with a decay (Adam, RMSProp) multiplies
// by.
inline float OneMinus(float beta) { return static_cast<float>(1.0 - static_cast<double>(beta)); }

// INVALID_ARGUMENT, naming the field, for an unknown name, a learning rate that is not > 0 and
// finite, or a hyper-parameter out of range (momentum, beta1, beta2 or rho outside [0, 1),
// a negative epsilon, adagrad with initial_accumulator_value <= 0 and epsilon == 0).
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::OptimizerConfig& config);

}  // namespace psflow

#endif  // PSFLOW_CORE_OPTIMIZER_H_
