// Between-graph training on one worker: every step pulls the parameters, computes gradients on
// a batch of this worker's shard, and pushes them. The chief (worker 0) creates the variables
// from its own seeded initial values first; the others wait for them.
#ifndef PSFLOW_WORKER_TRAINER_H_
#define PSFLOW_WORKER_TRAINER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/data/dataset.h"
#include "worker/nn/model.h"
#include "worker/parameter_sync.h"
#include "worker/worker_metrics.h"

namespace psflow {

struct TrainerOptions {
  int64_t batch_size = 100;
  int64_t train_steps = 0;  // when > 0, overrides train_epochs
  int train_epochs = 1;     // passes over this worker's shard
  int shard_index = 0;      // this worker trains on shard shard_index of num_shards
  int num_shards = 1;
  bool is_chief = true;
  uint64_t seed = 1;
  int64_t log_every_steps = 100;  // 0: no progress lines
  float max_grad_norm = 0;        // > 0: clip the gradients by global norm before each push
};

struct TrainResult {
  int64_t steps = 0;
  int64_t examples = 0;
  double seconds = 0;  // training loop only (not initialisation or evaluation)
  // Where the loop's time went: pulling parameters, computing gradients (batch included),
  // pushing gradients.
  double pull_seconds = 0;
  double compute_seconds = 0;
  double push_seconds = 0;
  float last_loss = 0;
  int64_t global_step = 0;     // last seen from the ps
  int64_t dropped_pushes = 0;  // pushes the ps did not apply (sync: stale or backup)
  double test_accuracy = 0;
  double test_loss = 0;

  double examples_per_second() const { return seconds > 0 ? examples / seconds : 0; }
};

class Trainer {
 public:
  // All references must outlive the trainer; metrics may be null.
  Trainer(nn::Model& model, ParameterSync& sync, const data::Dataset& train,
          const data::Dataset& test, TrainerOptions options, WorkerMetrics* metrics);

  // Trains, then evaluates the final parameters on the whole test set. INVALID_ARGUMENT when
  // the shard is smaller than one batch; errors from the ParameterSync as they come.
  absl::StatusOr<TrainResult> Run();

 private:
  absl::Status Evaluate(TrainResult& result);

  nn::Model& model_;
  ParameterSync& sync_;
  const data::Dataset& train_;
  const data::Dataset& test_;
  TrainerOptions options_;
  WorkerMetrics* metrics_;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_TRAINER_H_
