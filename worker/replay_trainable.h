// --compute=replay: a worker that spends a step's time instead of computing it, so that many
// workers share a few cores in network-scaling experiments while the real model's real gradients
// and parameters go through the real ps and transport.
//
// What is real: the parameters (pulled into the model's ParameterSet every step), the gradients
// (the real model's, computed on the first real batch: real values, sizes and sparse touched
// rows), what is pushed and pulled, and when: backward reports each layer's gradients to the
// GradientListener after that layer's share of the time, as a computing model would. What is not:
// every step after the first pushes the first step's gradients again (they do not follow the
// parameters), its loss is the first step's, and it computes nothing: it sleeps. Whatever is
// trained this way learns nothing meaningful; its figures are labelled replayed.
#ifndef PSFLOW_WORKER_REPLAY_TRAINABLE_H_
#define PSFLOW_WORKER_REPLAY_TRAINABLE_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/nn/model.h"
#include "worker/nn/trainable.h"

namespace psflow {

// `measured` (Model::ProfileLayers) scaled so that a step takes `step_seconds` (> 0) in all,
// each layer's forward and backward keeping its share. A profile that measured nothing (all
// zeros) is split evenly over the layers' backward.
std::vector<nn::LayerTime> ScaleToStep(std::vector<nn::LayerTime> measured, double step_seconds);

// For the start-up line: "12.000 ms/step (forward 4.000, backward 8.000; per layer ms
// forward/backward: dense0 1.000/2.000, ...)".
std::string DescribeReplay(const std::vector<nn::LayerTime>& step);

class ReplayTrainable final : public nn::Trainable {
 public:
  // Profiles `model` (which must outlive the result) on `batch` (Model::ProfileLayers, on this
  // machine, now: kProfileSteps timed steps) and replays the measured times, or with
  // step_seconds > 0 those scaled to step_seconds per step (ScaleToStep). The profile's errors.
  static constexpr int kProfileSteps = 5;
  static absl::StatusOr<std::unique_ptr<ReplayTrainable>> Create(nn::Model& model,
                                                                 const nn::Batch& batch,
                                                                 double step_seconds);
  // Replays `model` (which must outlive this) with `step[l]` the time of layer l's forward and
  // backward: step.size() must be model.num_layers().
  ReplayTrainable(nn::Model& model, std::vector<nn::LayerTime> step);

  nn::ParameterSet& params() override { return model_.params(); }
  int64_t labels_per_example() const override { return model_.labels_per_example(); }

  // Until a step's gradients are finite (the first, without loss scaling): the model's real
  // ComputeGradients on `batch`, kept. Every later step computes nothing and leaves the kept
  // gradients in params().grads(), whatever `batch` and the parameters are (copied in, with the
  // touched rows, only when the set's gradient buffer is one this has not filled yet: an
  // overlapped exchange that swaps buffers alternates between two); it sleeps
  // the forward time, then for each layer from the last to the first sleeps its backward time
  // and reports the layer's parameters to the listener. Returns the kept step's loss.
  // Deadlines are absolute (CLOCK_MONOTONIC from the step's start): a step never takes less than
  // the sum of its times, and a late wake-up or a slow listener does not delay the next layer's
  // end. The listener is told only when clip_norm <= 0 and no loss scale is set (Trainable's
  // contract), every layer with parameters exactly once per step, the real first step included.
  absl::StatusOr<double> ComputeGradients(const nn::Batch& batch, float clip_norm) override;
  void SetLossScale(float scale) override;
  bool last_step_finite() const override { return finite_; }
  void ResetState() override { model_.ResetState(); }
  // The real model's rows for `batch`: a replayed step pulls what a computing one would.
  absl::Status ListRowsRead(const nn::Batch& batch, nn::ParameterSet& into) override {
    return model_.ListRowsRead(batch, into);
  }
  void SetGradientListener(nn::GradientListener* listener) override { listener_ = listener; }

  // What a replayed step spends, per layer, and in all.
  const std::vector<nn::LayerTime>& step() const { return step_; }
  double step_seconds() const;

 private:
  // Tells the listener, last layer first, optionally after each layer's backward time.
  void Backward(bool sleep, bool stream);
  // Keeps the captured step's gradients; puts them in a gradient buffer not filled yet.
  void Keep();
  void Refill();

  nn::Model& model_;
  std::vector<nn::LayerTime> step_;
  nn::GradientListener* listener_ = nullptr;
  bool loss_scaled_ = false;
  bool captured_ = false;  // the step's gradients are kept
  std::vector<float> kept_grads_;
  std::vector<std::vector<int64_t>> kept_rows_;  // per parameter (sparse ones)
  std::array<const float*, 2> filled_{};         // the gradient buffers holding them
  bool finite_ = true;
  double loss_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_REPLAY_TRAINABLE_H_
