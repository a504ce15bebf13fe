// Deterministic placement of variables on ps tasks, balanced by bytes.
//
// Every worker calls this with the same inputs (the model's variables, the ps list in order) and
// so all agree on where each variable lives without talking; the chief then creates each
// variable on its task. Greedy longest-processing-time: variables in decreasing size (ties by
// name) each go to the least-loaded task (ties by lowest index).
#ifndef PSFLOW_CORE_PLACEMENT_H_
#define PSFLOW_CORE_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow {

struct VariableInfo {
  std::string name;
  int64_t bytes = 0;
};

struct Placement {
  // task_of[i] is the ps task that holds variables[i].
  std::vector<int> task_of;
  // Total bytes per ps task.
  std::vector<int64_t> bytes_per_task;
};

// INVALID_ARGUMENT when num_tasks < 1 or two variables share a name.
absl::StatusOr<Placement> PlaceVariables(const std::vector<VariableInfo>& variables, int num_tasks);

}  // namespace psflow

#endif  // PSFLOW_CORE_PLACEMENT_H_
