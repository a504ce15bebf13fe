#include "core/placement.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"
#include "core/tensor_shape.h"

namespace psflow {
namespace {

// FNV-1a, 64 bit: stable across processes and builds, which std::hash is not.
class Fingerprint {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ULL;
  }
  void Add(int64_t v) { Add(&v, sizeof v); }
  void Add(const std::string& s) {
    Add(static_cast<int64_t>(s.size()));
    Add(s.data(), s.size());
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// Lists each task's partitions (in partition order) and fingerprints the result.
Placement Finish(const std::vector<VariableInfo>& variables, int num_tasks, Placement placement) {
  placement.task_partitions.assign(num_tasks, {});
  Fingerprint fp;
  fp.Add(num_tasks);
  for (size_t i = 0; i < placement.partitions.size(); ++i) {
    auto& p = placement.partitions[i];
    auto& list = placement.task_partitions[p.task];
    p.index_on_task = static_cast<int>(list.size());
    list.push_back(static_cast<int>(i));
    const VariableInfo& v = variables[p.variable];
    fp.Add(v.name);
    fp.Add(static_cast<int64_t>(v.shape.size()));
    for (int64_t d : v.shape) fp.Add(d);
    fp.Add(p.row_begin);
    fp.Add(p.row_end);
    fp.Add(p.task);
  }
  placement.fingerprint = fp.value();
  return placement;
}

}  // namespace

double Placement::imbalance() const {
  const auto [lo, hi] = std::minmax_element(bytes_per_task.begin(), bytes_per_task.end());
  if (*lo == 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(*hi) / static_cast<double>(*lo);
}

std::string Placement::Describe() const {
  std::set<int> variables;
  for (const auto& p : partitions) variables.insert(p.variable);
  std::string out = absl::StrCat(task_partitions.size(), " ps task(s), ", partitions.size(),
                                 " partition(s) of ", variables.size(), " variable(s):");
  for (size_t t = 0; t < task_partitions.size(); ++t) {
    absl::StrAppend(&out, t == 0 ? " " : ", ", "ps", t, " ",
                    absl::StrFormat("%.1f KiB", static_cast<double>(bytes_per_task[t]) / 1024),
                    " (", task_partitions[t].size(), ")");
  }
  absl::StrAppend(&out, absl::StrFormat("; max/min %.3f", imbalance()));
  return out;
}

absl::StatusOr<PlacementStrategy> ParsePlacementStrategy(absl::string_view name) {
  if (name == "balanced") return PlacementStrategy::kBalanced;
  if (name == "round_robin") return PlacementStrategy::kRoundRobin;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown placement \"", name, "\" (balanced or round_robin)"));
}

absl::StatusOr<Placement> PlaceVariables(const std::vector<VariableInfo>& variables, int num_tasks,
                                         const PlacementOptions& options) {
  if (num_tasks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement needs >= 1 ps task, got ", num_tasks));
  }
  if (variables.empty()) return absl::InvalidArgumentError("placement: the model has no variables");
  std::set<std::string_view> names;
  int64_t total_bytes = 0;
  std::vector<int64_t> elements(variables.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    const VariableInfo& v = variables[i];
    if (v.name.empty()) return absl::InvalidArgumentError("placement: a variable has no name");
    if (!names.insert(v.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate variable name \"", v.name, "\""));
    }
    ASSIGN_OR_RETURN(elements[i], CheckShape(v.shape, v.name));
    total_bytes += elements[i] * 4;
  }

  Placement placement;
  if (options.strategy == PlacementStrategy::kRoundRobin) {
    placement.bytes_per_task.assign(num_tasks, 0);
    for (size_t i = 0; i < variables.size(); ++i) {
      const VariableInfo& v = variables[i];
      PartitionPlacement pp;
      pp.variable = static_cast<int>(i);
      pp.row_end = v.shape.empty() ? 1 : v.shape[0];
      pp.row_elements = pp.row_end == 0 ? 0 : elements[i] / pp.row_end;
      pp.task = static_cast<int>(i % static_cast<size_t>(num_tasks));
      placement.bytes_per_task[pp.task] += pp.bytes();
      placement.partitions.push_back(pp);
    }
    return Finish(variables, num_tasks, std::move(placement));
  }
  const int64_t piece = std::max(
      options.min_partition_bytes,
      total_bytes / (static_cast<int64_t>(num_tasks) * std::max(1, options.pieces_per_task)));
  for (size_t i = 0; i < variables.size(); ++i) {
    const VariableInfo& v = variables[i];
    const int64_t rows = v.shape.empty() ? 1 : v.shape[0];
    const int64_t row_elements = rows == 0 ? 0 : elements[i] / rows;
    const int64_t bytes = elements[i] * 4;
    int64_t parts = 1;
    if (num_tasks > 1 && bytes > piece) parts = std::min(rows, (bytes + piece - 1) / piece);
    parts = std::max<int64_t>(parts, 1);
    for (int64_t p = 0; p < parts; ++p) {
      PartitionPlacement pp;
      pp.variable = static_cast<int>(i);
      pp.part = static_cast<int>(p);
      pp.num_parts = static_cast<int>(parts);
      pp.row_begin = rows * p / parts;
      pp.row_end = rows * (p + 1) / parts;
      pp.row_elements = row_elements;
      placement.partitions.push_back(pp);
    }
  }

  std::vector<size_t> order(placement.partitions.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& pa = placement.partitions[a];
    const auto& pb = placement.partitions[b];
    if (pa.bytes() != pb.bytes()) return pa.bytes() > pb.bytes();
    if (pa.variable != pb.variable)
      return variables[pa.variable].name < variables[pb.variable].name;
    return pa.part < pb.part;
  });
  placement.bytes_per_task.assign(num_tasks, 0);
  for (size_t i : order) {
    auto& p = placement.partitions[i];
    p.task = static_cast<int>(
        std::min_element(placement.bytes_per_task.begin(), placement.bytes_per_task.end()) -
        placement.bytes_per_task.begin());
    placement.bytes_per_task[p.task] += p.bytes();
  }
  return Finish(variables, num_tasks, std::move(placement));
}

}  // namespace psflow
