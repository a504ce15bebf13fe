// The NetworkPolicy (networking.k8s.io/v1) of a job with spec.networkPolicy.enabled:
// "<job>-network", owned by the job (deleted with it), selecting every pod of the job
// (psflow.io/job-name=<job>), Ingress only. It admits
//  - to the ports named "psflow-port" (the ps tasks' gRPC service, and each replica's address in
//    TF_CONFIG) and "psflow-bulk" (the ps tasks' bulk channel): the job's own pods, nothing else;
//  - to the port named "metrics" (/metrics, replica_objects.h): spec.networkPolicy.metricsFrom (a
//    list of NetworkPolicyPeers, passed through), or every pod of the job's namespace without it.
// Named ports follow whatever containerPort a template gives them. Everything else is refused
// once the policy selects the pods (where the network plugin enforces NetworkPolicy).
//
// The operator creates it before a job's first pods (and again when it makes pods and finds it
// gone); turning networkPolicy off later leaves it until the job is deleted.
#ifndef PSFLOW_OPERATOR_CONTROLLER_NETWORK_POLICY_H_
#define PSFLOW_OPERATOR_CONTROLLER_NETWORK_POLICY_H_

#include <nlohmann/json.hpp>
#include <string>

#include "operator/api/training_job.h"

namespace psflow::controller {

// "<job>-network".
std::string NetworkPolicyName(const std::string& job_name);

// `job_object` is the TrainingJob as stored (metadata.uid and spec.networkPolicy.metricsFrom are
// read); `job` is its parsed form.
nlohmann::json BuildNetworkPolicy(const nlohmann::json& job_object, const api::TrainingJob& job);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_NETWORK_POLICY_H_
