#include "operator/api/cluster_spec_builder.h"

#include "absl/strings/str_cat.h"

namespace psflow::api {

std::string ReplicaName(const TrainingJob& job, ReplicaType type, int index) {
  return absl::StrCat(job.name, "-", TaskTypeName(type), "-", index);
}

ClusterSpec BuildClusterSpec(const TrainingJob& job, const AddressFn& address) {
  ClusterSpec spec;
  for (const auto& [type, replica] : job.replica_specs) {
    if (replica.replicas == 0) continue;
    auto& list = spec.cluster[std::string(TaskTypeName(type))];
    for (int i = 0; i < replica.replicas; ++i) list.push_back(address(type, i));
  }
  return spec;
}

ClusterSpec ForTask(const ClusterSpec& cluster, ReplicaType type, int index) {
  ClusterSpec spec = cluster;
  spec.task = {std::string(TaskTypeName(type)), index};
  return spec;
}

}  // namespace psflow::api
