// The worker's side of the ps protocol.
//
// Placement: PlaceVariables (core/placement.h) over the model's variables and the ps list, so
// every worker agrees on which task holds which rows without talking. Transfer: each task's
// partitions are cut into chunks of at most kChunkBytes (core/chunk_plan.h); a Pull or Push sends
// every chunk of every task at once as its own raw gRPC call (several HTTP/2 streams in flight per
// task, all tasks in parallel) and waits for all. A push hands gRPC the gradient buffer itself
// as slices (no copy); a pull copies each reply straight from the received slices into the
// parameter buffer (one copy).
//
// Sync mode: a pull after a push asks the ps for the next step and is parked there until that
// step has been aggregated. Recovery: when a ps task becomes unreachable mid-training (killed and
// restarted), the push in flight is dropped and the next Pull waits, for up to connect_timeout,
// until the task is ready again — restored from its checkpoint, or (without one) re-created by
// the chief from the chief's latest parameters — and starts from its state.
//
// Not thread-safe: one trainer thread uses it.
#ifndef PSFLOW_WORKER_PS_CLIENT_H_
#define PSFLOW_WORKER_PS_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/chunk_plan.h"
#include "core/placement.h"
#include "core/wire_type.h"
#include "worker/parameter_sync.h"

namespace psflow {

class PsClient final : public ParameterSync {
 public:
  struct Options {
    std::vector<std::string> ps_addresses;  // "host:port", in task order
    TrainingConfig training;
    // How long Prepare (and recovery) keeps retrying an unreachable ps or waiting for the chief.
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
    // Deadline of each call; also how long a sync pull may wait for its step.
    std::chrono::milliseconds rpc_timeout{std::chrono::seconds(60)};
    // Element type of parameters and gradients on the wire (--wire_dtype); the ps keeps float32.
    WireType wire_type = WireType::kFloat32;
  };

  // `params` fixes the variables (names, shapes) and must not change layout afterwards.
  // INVALID_ARGUMENT when there is no ps address.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(Options options,
                                                          const nn::ParameterSet& params);
  ~PsClient() override;

  absl::Status Prepare(const nn::ParameterSet& params, bool is_chief) override;
  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override;
  absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t examples) override;
  absl::Status SetLearningRate(float learning_rate) override;
  absl::Status Leave() override;

  const Placement& placement() const { return placement_; }

 private:
  struct Task;
  struct Call;
  explicit PsClient(Options options);
  absl::Status InitializeTask(Task& task, const nn::ParameterSet& params);
  absl::Status WaitReadyTask(Task& task);
  absl::Status Recover(nn::ParameterSet& params);
  // Sends every chunk of every task (or only `only`) and waits for all replies: params'
  // gradients (TK_GRADIENT), params' values (TK_ASSIGN), or a pull (TK_PULL) whose replies are
  // written into pull_into's values (the same layout as params; null for the others).
  absl::Status Transfer(const nn::ParameterSet& params, proto::TransferKind kind, int64_t examples,
                        SyncResult* result, Task* only, nn::ParameterSet* pull_into);

  Options options_;
  Placement placement_;
  std::vector<std::unique_ptr<Task>> tasks_;
  bool need_recovery_ = false;
  bool is_chief_ = false;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_PS_CLIENT_H_
