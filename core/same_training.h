// The rule that a ps task's variables keep the training they were created for. A chief that finds
// them already there (a task restored from its checkpoint, a restarted chief) and every other
// worker must ask for the same optimizer and the same step rules (sync or async) as the task
// holds: the optimizer's slots and the step rules live on the ps, so a different request would be
// silently ignored. The learning rate, the number of workers and replicas_to_aggregate may change
// (a schedule, an elastic job).
#ifndef PSFLOW_CORE_SAME_TRAINING_H_
#define PSFLOW_CORE_SAME_TRAINING_H_

#include "absl/status/status.h"
#include "proto/ps.pb.h"

namespace psflow {

// OK when `asked` (a worker's) matches `held` (the task's); an empty held optimizer name (a ps
// that does not say) matches any. FAILED_PRECONDITION naming both and what to do otherwise.
absl::Status CheckSameTraining(const proto::OptimizerConfig& held_optimizer,
                               const proto::SyncConfig& held_sync,
                               const proto::OptimizerConfig& asked_optimizer,
                               const proto::SyncConfig& asked_sync);

}  // namespace psflow

#endif  // PSFLOW_CORE_SAME_TRAINING_H_
