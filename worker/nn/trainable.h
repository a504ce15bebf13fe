// What the trainer trains: one Model, or replicas of it that split each batch (Towers). The
// parameters and gradients the trainer pulls into and pushes from are one ParameterSet either
// way.
#ifndef PSFLOW_WORKER_NN_TRAINABLE_H_
#define PSFLOW_WORKER_NN_TRAINABLE_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/nn/parameter_set.h"
#include "worker/nn/parameter_update.h"

namespace psflow::nn {

// One batch in host memory: inputs [size, elements per example], labels [size,
// labels_per_example()].
struct Batch {
  const float* inputs = nullptr;
  const int32_t* labels = nullptr;
  int64_t size = 0;
};

// Told, during ComputeGradients, which parameters' host gradients are final, in the order
// backward produces them (the last layer's first), so they can be sent while backward goes on.
class GradientListener {
 public:
  virtual ~GradientListener() = default;
  // params().grads() of the parameters [first, last) (handles) are final for this step; they stay
  // so until the next ComputeGradients. Called on the thread that runs ComputeGradients.
  virtual void GradientsReady(ParameterSet::Handle first, ParameterSet::Handle last) = 0;
};

class Trainable {
 public:
  virtual ~Trainable() = default;

  // The parameters (host values the trainer overwrites with pulls) and their gradients (host,
  // what the trainer pushes). A step computes with the values as they are when it starts: a
  // writer of values() calls params().ValuesChanged() and the device copy follows by itself.
  virtual ParameterSet& params() = 0;
  // Predictions (and labels) per example: 1 for a classifier, the time steps of a sequence.
  virtual int64_t labels_per_example() const = 0;
  // params().grads() := the gradient of the mean loss over `batch`, clipped by global norm when
  // clip_norm > 0; returns the loss (Model::ComputeGradients says which). Errors: a device
  // failure, naming the layer and its shapes. With a loss scale (SetLossScale) backward runs on
  // the scaled loss and the gradients are unscaled before they are clipped; a step whose measured
  // gradients are not all finite (last_step_finite() false) leaves params().grads() undefined:
  // it must not be pushed.
  virtual absl::StatusOr<double> ComputeGradients(const Batch& batch, float clip_norm) = 0;
  // Loss scaling from the next step on (LossScaler): scale > 0 is what the loss's gradient is
  // multiplied by before backward, and turns on the finiteness check of every step's gradients
  // (at a scale of 1 too); 0, the default, turns loss scaling off.
  virtual void SetLossScale(float scale) = 0;
  // Whether every gradient of the last ComputeGradients was finite. Measured (on the device)
  // only when the gradients were clipped or a loss scale was set; true otherwise.
  virtual bool last_step_finite() const = 0;
  // Sparse pulls: lists in `into` (a set of params()' layout) the rows of each sparse parameter
  // that a training step on `batch` reads, and turns into.pulls_rows() on when there is such a
  // parameter (ParameterSet's contract), so a pull for that step brings only those rows. The errors
  // the step would give for that batch (an id outside the vocabulary). Default: nothing (pulls
  // bring every row).
  virtual absl::Status ListRowsRead(const Batch& /*batch*/, ParameterSet& /*into*/) {
    return absl::OkStatus();
  }
  // Stateful layers (LSTMs) start from zeros again.
  virtual void ResetState() = 0;
  // From the next ComputeGradients on, tells `listener` (null: nobody; it outlives its use) as
  // each layer's gradients become final on the host. Only a step whose gradients need no global
  // look (no clipping, no loss scale) streams; other steps never call the listener, and neither
  // does a Trainable that cannot stream (this default).
  virtual void SetGradientListener(GradientListener* /*listener*/) {}

  // ---- Training alone (LocalUpdate): the optimizer's update where the steps compute.
  // The update of params() by `optimizer` (which must outlive it) where the steps compute
  // (Backend::MakeUpdate): on a GPU over the device values, its slots in device memory. While an
  // update on the device lives, the steps leave their gradients on the device for it
  // (params().grads() on the host are not written, nothing streams to a listener), each Apply
  // reaches every replica, and params()' host values lag behind until DownloadParameters.
  // Default: the update over the host buffers (MakeHostUpdate). RESOURCE_EXHAUSTED when the
  // device has no room for the slots.
  virtual absl::StatusOr<std::unique_ptr<ParameterUpdate>> MakeUpdate(const Optimizer& optimizer) {
    return MakeHostUpdate(optimizer, params());
  }
  // After updates on the device: their values to params()' host values, and the first device
  // error since the last step. Nothing where the update runs on the host (the default).
  virtual absl::Status DownloadParameters() { return absl::OkStatus(); }
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_TRAINABLE_H_
