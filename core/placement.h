// Deterministic placement of variables on ps tasks, balanced by bytes, big variables split.
//
// Every worker calls PlaceVariables with the same inputs (the model's variables in model order,
// the number of ps tasks) and so all agree, without talking, on which task holds which rows of
// which variable; the chief creates each task's partitions and every Pull/Push addresses them by
// their index on the task. The ps never sees the whole model, only its partitions.
//
// Splitting: with more than one task, a variable bigger than the piece size is split along its
// first dimension into ceil(bytes / piece) partitions of (nearly) equal row counts, where
// piece = max(min_partition_bytes, total bytes / (tasks * pieces_per_task)); no partition has
// fewer than one row. Then greedy longest-processing-time: partitions in decreasing size (ties
// by variable name, then part) each go to the least-loaded task (ties: lowest index). With every
// piece at most 1/pieces_per_task of a task's share, the loads end within a piece of each other:
// max/min <= 1.1 for every seed model and 1..4 tasks (see placement_test.cc). A single task gets
// every variable whole.
//
// kRoundRobin is TensorFlow 1.x's replica_device_setter default, kept to reproduce the seeds'
// experiments: every variable whole, the i-th variable in model order on task i % num_tasks,
// whatever its size (the CIFAR-10 CNN on 2 tasks: every weight on task 0, every bias on task 1).
#ifndef PSFLOW_CORE_PLACEMENT_H_
#define PSFLOW_CORE_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

// A float32 variable of the model.
struct VariableInfo {
  std::string name;
  std::vector<int64_t> shape;  // rank 0 (a scalar) is one row of one element
};

enum class PlacementStrategy { kBalanced, kRoundRobin };

struct PlacementOptions {
  PlacementStrategy strategy = PlacementStrategy::kBalanced;
  // kBalanced only:
  int64_t min_partition_bytes = 4 << 10;
  int pieces_per_task = 32;
};

struct PartitionPlacement {
  int variable = 0;  // index into the variables given
  int part = 0;      // 0..num_parts-1 along the first dimension
  int num_parts = 1;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  int64_t row_elements = 1;  // elements per row (product of the shape's other dimensions)
  int task = 0;
  int index_on_task = 0;  // position in task_partitions[task]
  int64_t elements() const { return (row_end - row_begin) * row_elements; }
  int64_t bytes() const { return elements() * 4; }
};

struct Placement {
  // Every partition, in variable order then part order.
  std::vector<PartitionPlacement> partitions;
  // Per task: indices into `partitions`, in the order the task lists (and is addressed by) them.
  std::vector<std::vector<int>> task_partitions;
  std::vector<int64_t> bytes_per_task;
  // Identifies the variables (names, shapes) and this placement; ps and workers compare it.
  uint64_t fingerprint = 0;

  // max / min of bytes_per_task (infinity when a task holds nothing).
  double imbalance() const;
  // One line for the log: "2 ps tasks, 5 partitions of 4 variables: ps0 159.1 KiB (3), ...".
  std::string Describe() const;
};

// "balanced" or "round_robin"; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<PlacementStrategy> ParsePlacementStrategy(absl::string_view name);

// INVALID_ARGUMENT when num_tasks < 1, there are no variables, two share a name, a name is empty
// or a shape has a negative dimension or more than 2^40 elements.
absl::StatusOr<Placement> PlaceVariables(const std::vector<VariableInfo>& variables, int num_tasks,
                                         const PlacementOptions& options = {});

}  // namespace psflow

#endif  // PSFLOW_CORE_PLACEMENT_H_
