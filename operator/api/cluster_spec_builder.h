// From a TrainingJob to the cluster spec its replicas get as TF_CONFIG.
#ifndef PSFLOW_OPERATOR_API_CLUSTER_SPEC_BUILDER_H_
#define PSFLOW_OPERATOR_API_CLUSTER_SPEC_BUILDER_H_

#include <functional>
#include <string>

#include "core/cluster_spec.h"
#include "operator/api/training_job.h"

namespace psflow::api {

// "<job>-<task type>-<index>", e.g. "mnist-mlp-worker-1": the replica's pod and Service name.
std::string ReplicaName(const TrainingJob& job, ReplicaType type, int index);

// The cluster of every replica of every type ("chief", "ps", "worker", "evaluator" lists), with
// `address(type, index)` giving each "host:port". The task is left for the caller to set per
// replica (ForTask).
using AddressFn = std::function<std::string(ReplicaType type, int index)>;
ClusterSpec BuildClusterSpec(const TrainingJob& job, const AddressFn& address);

// A copy of `cluster` naming replica (type, index) as this task.
ClusterSpec ForTask(const ClusterSpec& cluster, ReplicaType type, int index);

}  // namespace psflow::api

#endif  // PSFLOW_OPERATOR_API_CLUSTER_SPEC_BUILDER_H_
