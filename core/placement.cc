#include "core/placement.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"

namespace psflow {

absl::StatusOr<Placement> PlaceVariables(const std::vector<VariableInfo>& variables,
                                         int num_tasks) {
  if (num_tasks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement needs >= 1 ps task, got ", num_tasks));
  }
  std::set<std::string_view> names;
  for (const auto& v : variables) {
    if (!names.insert(v.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate variable name \"", v.name, "\""));
    }
  }
  std::vector<size_t> order(variables.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (variables[a].bytes != variables[b].bytes) return variables[a].bytes > variables[b].bytes;
    return variables[a].name < variables[b].name;
  });
  Placement p;
  p.task_of.assign(variables.size(), 0);
  p.bytes_per_task.assign(num_tasks, 0);
  for (size_t i : order) {
    const int task =
        static_cast<int>(std::min_element(p.bytes_per_task.begin(), p.bytes_per_task.end()) -
                         p.bytes_per_task.begin());
    p.task_of[i] = task;
    p.bytes_per_task[task] += variables[i].bytes;
  }
  return p;
}

}  // namespace psflow
