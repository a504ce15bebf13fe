// How a worker exchanges parameters and gradients: with ps tasks over gRPC (PsClient) or, for a
// single process with no ps, in place (LocalSgd). The trainer sees only this interface.
#ifndef PSFLOW_WORKER_PARAMETER_SYNC_H_
#define PSFLOW_WORKER_PARAMETER_SYNC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/nn/parameter_set.h"

namespace psflow {

struct SyncResult {
  int64_t global_step = 0;  // after the pull or push
  int64_t bytes = 0;        // tensor bytes moved by this call
};

class ParameterSync {
 public:
  virtual ~ParameterSync() = default;

  // Makes the variables exist. The chief creates them from params' current values (a restarted
  // chief finds them and leaves them be); other workers wait until the chief has done so.
  // UNAVAILABLE / DEADLINE_EXCEEDED naming the ps task when it cannot be reached in time.
  virtual absl::Status Prepare(const nn::ParameterSet& params, bool is_chief,
                               float learning_rate) = 0;

  // Overwrites params' values with the current ones.
  virtual absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) = 0;

  // Sends params' gradients, computed from parameters at `step`, over `examples` examples.
  // Remote implementations only read params; LocalSgd applies the update to its values.
  virtual absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t step,
                                          int64_t examples) = 0;
};

// In-process SGD with no ps: Pull is a no-op, Push applies the update to params' values. The
// baseline the ps path is measured against.
class LocalSgd final : public ParameterSync {
 public:
  absl::Status Prepare(const nn::ParameterSet&, bool, float learning_rate) override;
  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override;
  absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t step,
                                  int64_t examples) override;

 private:
  float learning_rate_ = 0.0f;
  int64_t global_step_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_PARAMETER_SYNC_H_
