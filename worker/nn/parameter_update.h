// An optimizer's update (core/optimizer.h) applied to a ParameterSet where its backend computes:
// over the host buffers (the CPU backend, or any backend whose gradients came to the host), or
// over a GPU's mirror with the slots beside it in device memory (Backend::MakeUpdate), so that
// a worker training alone moves no parameter and no gradient between host and device per step.
//
// Both apply the same rule to the same elements: dense parameters whole, sparse ones (embeddings)
// only in their touched rows, as the ps does, so optimizers with state (momentum, Adam) leave
// untouched rows alone.
#ifndef PSFLOW_WORKER_NN_PARAMETER_UPDATE_H_
#define PSFLOW_WORKER_NN_PARAMETER_UPDATE_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "core/optimizer.h"
#include "worker/nn/parameter_set.h"

namespace psflow::nn {

class ParameterUpdate {
 public:
  virtual ~ParameterUpdate() = default;

  // One update of params' values by its gradients; `step` >= 1 is the number of this update
  // (Adam's bias correction). On the host: done when it returns, and params.ValuesChanged() is
  // called. On a device: queued on the compute stream after the step's backward, reading the
  // device gradients (finished there: GradientFinish::Where::kOnDevice) and writing the device
  // values; the host values stay as they were (Backend::DownloadParameters brings them up to
  // date) and a failure is reported by the next FinishGradients or Synchronize. params must be
  // the set the update was made for.
  virtual void Apply(ParameterSet& params, float learning_rate, int64_t step) = 0;

  // Whether Apply reads and writes the device copies (a GPU) rather than the host buffers.
  virtual bool on_device() const = 0;
};

// The update over params' host values and gradients, with its slots in host memory (zero-copy
// on the CPU backend, whose device buffers are the host ones). `optimizer` must outlive it.
std::unique_ptr<ParameterUpdate> MakeHostUpdate(const Optimizer& optimizer,
                                                const ParameterSet& params);

// `update`, with `after_apply` run after each of its Apply calls and `at_end` when it is
// destroyed (either may be empty): how a trainable keeps its gradients on the device for as long
// as an update there lives, and gives what the update wrote to its replicas
// (Trainable::MakeUpdate).
std::unique_ptr<ParameterUpdate> WithHooks(std::unique_ptr<ParameterUpdate> update,
                                           std::function<void()> after_apply,
                                           std::function<void()> at_end);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_PARAMETER_UPDATE_H_
