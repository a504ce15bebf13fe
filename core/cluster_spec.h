// The cluster spec: which tasks a job has and which one this process is.
//
// psflow speaks TensorFlow's own TF_CONFIG format so stock TensorFlow images run under the
// operator too:
//   {"cluster": {"ps": ["h:2222"], "worker": ["h:2222", "h:2223"]},
//    "task": {"type": "worker", "index": 0}, "environment": "cloud"}
#ifndef PSFLOW_CORE_CLUSTER_SPEC_H_
#define PSFLOW_CORE_CLUSTER_SPEC_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

struct TaskId {
  std::string type;  // "ps", "worker", "chief", "evaluator"
  int index = 0;
  bool operator==(const TaskId&) const = default;
};

struct ClusterSpec {
  // Task type -> "host:port" of each task, in index order.
  std::map<std::string, std::vector<std::string>> cluster;
  TaskId task;
  std::string environment = "cloud";

  // Addresses of `type`'s tasks; empty when the cluster has none.
  const std::vector<std::string>& Tasks(absl::string_view type) const;
  // Address of this process's own task.
  const std::string& SelfAddress() const;
  // True for the task that initialises variables: "chief" 0 if the cluster has a chief, else
  // worker 0 (TensorFlow's convention).
  bool IsChief() const;

  bool operator==(const ClusterSpec&) const = default;
};

// Parses TF_CONFIG JSON. INVALID_ARGUMENT with a one-line reason when it is not JSON, lacks
// "cluster" or "task", an address is not "host:port", or the task index is out of range.
absl::StatusOr<ClusterSpec> ParseTfConfig(absl::string_view json);

// Serialises to TF_CONFIG JSON (round-trips through ParseTfConfig).
std::string ToTfConfig(const ClusterSpec& spec);

// Builds a spec from the seed scripts' flags (comma-separated host lists). Same validation as
// ParseTfConfig.
absl::StatusOr<ClusterSpec> ClusterSpecFromFlags(absl::string_view job_name, int task_index,
                                                 absl::string_view ps_hosts,
                                                 absl::string_view worker_hosts);

// "a:1, b:2" -> {"a:1", "b:2"}: comma-separated, entries trimmed, empty entries dropped.
std::vector<std::string> SplitHostList(absl::string_view hosts);

// Checks the invariants ParseTfConfig promises (used by both constructors).
absl::Status ValidateClusterSpec(const ClusterSpec& spec);

}  // namespace psflow

#endif  // PSFLOW_CORE_CLUSTER_SPEC_H_
