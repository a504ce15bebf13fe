// How a worker exchanges parameters and gradients: with ps tasks over gRPC (PsClient) or, for a
// single process with no ps, in place (LocalUpdate). The trainer sees only this interface.
#ifndef PSFLOW_WORKER_PARAMETER_SYNC_H_
#define PSFLOW_WORKER_PARAMETER_SYNC_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "worker/nn/model.h"
#include "worker/nn/parameter_set.h"
#include "worker/nn/parameter_update.h"
#include "worker/nn/trainable.h"

namespace psflow {

class Optimizer;

struct SyncResult {
  int64_t global_step = 0;  // after the pull or push (ps task 0's)
  int64_t bytes = 0;        // tensor bytes moved by this call
  bool dropped = false;     // push: not applied (stale, a backup worker's, or the ps restarted)
  // Overlapped (OverlappedSync): of this call's time, the wait for the exchange in flight, and
  // the push + pull time of the exchange it finished, spent on the background thread.
  double waited_seconds = 0;
  double background_seconds = 0;
};

// What the chief tells the ps tasks when it creates the variables.
struct TrainingConfig {
  proto::OptimizerConfig optimizer;  // name "sgd" etc. and the initial learning rate
  proto::SyncConfig sync;            // total_workers, sync_replicas, replicas_to_aggregate
  int worker_index = 0;
};

class ParameterSync {
 public:
  virtual ~ParameterSync() = default;

  // Makes the variables exist. The chief creates them from params' current values (a restarted
  // chief, or ps tasks restored from a checkpoint, keep what is there); other workers wait until
  // the chief has done so. UNAVAILABLE / DEADLINE_EXCEEDED naming the ps task when it cannot be
  // reached in time; FAILED_PRECONDITION when the ps holds a different model.
  virtual absl::Status Prepare(const nn::ParameterSet& params, bool is_chief) = 0;

  // Overwrites params' values with the current ones (and says so: ParameterSet::ValuesChanged).
  // In sync mode, waits (on the ps, without polling) until the step after this worker's last
  // push has been aggregated.
  virtual absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) = 0;

  // Sends params' gradients, computed from the parameters of the last Pull, over `examples`.
  // Remote implementations only read params; LocalUpdate applies the update to its values (and
  // says so).
  virtual absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t examples) = 0;

  // Overlap within a step: the gradients of params' parameters [first, last) (handles) for the
  // Push about to come, over `examples`, are final; an implementation may start sending them now.
  // That Push then sends the rest, waits for all, and reports a failure of an early send.
  // Default: nothing (Push sends everything).
  virtual void GradientsReady(const nn::ParameterSet& /*params*/,
                              nn::ParameterSet::Handle /*first*/, nn::ParameterSet::Handle /*last*/,
                              int64_t /*examples*/) {}

  // Sparse pulls (ParameterSet::pulls_rows): which step's rows the values a Push starts pulling
  // serve, counted from the step pushed; 0 when a Push pulls nothing (the default: the next Pull
  // pulls for the step it starts, with the rows listed in its params then).
  virtual int pull_ahead() const { return 0; }

  // The chief changes the learning rate on every ps task (e.g. a per-epoch decay).
  virtual absl::Status SetLearningRate(float learning_rate) = 0;

  // Completes what is still in flight (OverlappedSync: the last exchange, whose pulled values
  // it then writes into params) and returns what that push did; nullopt when nothing was, as
  // always for the others. Called before SetLearningRate and Leave, and at the end of training.
  virtual absl::StatusOr<std::optional<SyncResult>> Flush(nn::ParameterSet& /*params*/) {
    return std::nullopt;
  }

  // This worker is done: sync mode stops counting on it. A Pull after it reads the ps.
  virtual absl::Status Leave() = 0;

  // After Leave: how many other workers are still training (the most that any ps task still
  // counts on: joined and not left; 0 when every one has left, and always without ps tasks) and
  // the global step (the most of any task's), to tell training from counted workers that are gone
  // (a ps restored from a checkpoint made before they left counts them again).
  struct Others {
    int training = 0;
    int64_t global_step = 0;
  };
  virtual absl::StatusOr<Others> OthersTraining() { return Others{}; }
};

// In-process training with no ps: Pull is a no-op, Push applies the configured optimizer to
// params' values (sparse parameters only in their touched rows, as the ps). The baseline the ps
// path is measured against.
//
// Where the update runs (nn::ParameterUpdate): without a trainable, over the host values and
// gradients. With the trainable that trains (Create's `trainable`: a Model or Towers), where it
// computes (Trainable::MakeUpdate): on a GPU the slots live in device memory, the steps keep
// their gradients there (from Prepare on) and Push queues one fused kernel (towers: on the first
// GPU, whose values then go to the others, over peer copies where the GPUs allow them, else
// through the host), so no parameter or gradient crosses the bus to the host per step; the host
// values then lag behind until Flush (called at every epoch's start and at the end of training)
// copies the device's values down.
class LocalUpdate final : public ParameterSync {
 public:
  // INVALID_ARGUMENT for a bad optimizer config (MakeOptimizer). `trainable`, when given, must be
  // the one whose params() are pushed and must outlive this.
  static absl::StatusOr<std::unique_ptr<LocalUpdate>> Create(const TrainingConfig& config,
                                                             nn::Trainable* trainable = nullptr);
  ~LocalUpdate() override;

  // With a trainable: makes its update (RESOURCE_EXHAUSTED when the GPU has no room for the
  // optimizer's slots).
  absl::Status Prepare(const nn::ParameterSet& params, bool is_chief) override;
  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override;
  absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t examples) override;
  absl::Status SetLearningRate(float learning_rate) override;
  // After updates on the device: their values to params' host values (and the first device
  // error since the last step, if any).
  absl::StatusOr<std::optional<SyncResult>> Flush(nn::ParameterSet& params) override;
  absl::Status Leave() override { return absl::OkStatus(); }

  // Whether the update runs on a device (known after Prepare).
  bool on_device() const { return update_ != nullptr && update_->on_device(); }

 private:
  LocalUpdate(std::unique_ptr<Optimizer> optimizer, nn::Trainable* trainable);
  std::unique_ptr<Optimizer> optimizer_;
  nn::Trainable* trainable_;  // null: the update runs on the host
  float learning_rate_;
  std::unique_ptr<nn::ParameterUpdate> update_;  // made by Prepare
  bool device_ahead_ = false;  // the device values changed since the host's were brought up
  int64_t global_step_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_PARAMETER_SYNC_H_
