#include "core/same_training.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace psflow {
namespace {

proto::OptimizerConfig Optimizer(const std::string& name, float rate) {
  proto::OptimizerConfig o;
  o.set_name(name);
  o.set_learning_rate(rate);
  return o;
}

proto::SyncConfig Sync(bool sync, int replicas, int workers) {
  proto::SyncConfig s;
  s.set_sync_replicas(sync);
  s.set_replicas_to_aggregate(replicas);
  s.set_total_workers(workers);
  return s;
}

TEST(SameTraining, TheOptimizerAndTheStepRulesMustMatchTheRestMayChange) {
  struct Row {
    std::string what;
    proto::OptimizerConfig held_optimizer;
    proto::SyncConfig held_sync;
    proto::OptimizerConfig asked_optimizer;
    proto::SyncConfig asked_sync;
    std::string error;  // empty: OK
  };
  const std::vector<Row> rows = {
      {"the same", Optimizer("adam", 0.1f), Sync(true, 2, 2), Optimizer("adam", 0.1f),
       Sync(true, 2, 2), ""},
      {"another learning rate (a schedule)", Optimizer("sgd", 1), Sync(false, 0, 2),
       Optimizer("sgd", 0.5f), Sync(false, 0, 2), ""},
      {"other worker counts (an elastic job)", Optimizer("sgd", 1), Sync(true, 0, 2),
       Optimizer("sgd", 1), Sync(true, 3, 5), ""},
      {"a ps that does not name its optimizer", Optimizer("", 0), Sync(false, 0, 1),
       Optimizer("momentum", 1), Sync(false, 0, 1), ""},
      {"another optimizer", Optimizer("sgd", 1), Sync(false, 0, 2), Optimizer("adam", 1),
       Sync(false, 0, 2),
       "the ps task's variables train with optimizer sgd, async steps; this worker asks for "
       "optimizer adam, async steps: every worker must give the same --optimizer and "
       "--sync_replicas, and a ps task restored from its checkpoint keeps what it was created "
       "with (an empty --checkpoint_dir starts afresh)"},
      {"sync asked of an async task", Optimizer("sgd", 1), Sync(false, 0, 2), Optimizer("sgd", 1),
       Sync(true, 0, 2),
       "the ps task's variables train with optimizer sgd, async steps; this worker asks for "
       "optimizer sgd, sync steps"},
  };
  for (const Row& row : rows) {
    const absl::Status s =
        CheckSameTraining(row.held_optimizer, row.held_sync, row.asked_optimizer, row.asked_sync);
    if (row.error.empty()) {
      EXPECT_TRUE(s.ok()) << row.what << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << row.what;
      EXPECT_EQ(std::string(s.message()).substr(0, row.error.size()), row.error) << row.what;
    }
  }
}

}  // namespace
}  // namespace psflow
