// The Pod the operator creates for each replica `<job>-<type>-<index>`, and the one headless
// Service of the job that gives every replica its DNS name.
//
// A pod is the replica spec's template (passed through untouched) plus: name, namespace, the
// labels below, an ownerReference to the job (controller=true, so deleting the job deletes it),
// restartPolicy mapped from the replica's policy, and on the main container (the one named
// "psflow", else the first) the env TF_CONFIG, PSFLOW_JOB_NAME, PSFLOW_NAMESPACE,
// PSFLOW_REPLICA_TYPE, PSFLOW_REPLICA_INDEX, PSFLOW_METRICS_PORT, and the ports "psflow-port"
// (default 2222) and "metrics" (default 9100) when the template does not declare them; on a ps
// pod also the port "psflow-bulk" (default psflow-port + 1) and PSFLOW_BULK_PORT naming it; a ps
// pod's checkpoint volume (checkpoint_volume.h); with spec.sharedMemory, the node's socket
// directory (shared_memory_channel.h); with spec.tls.enabled, the replica's
// certificates mounted and its TLS flags (job_certificates.h); the restricted security defaults
// (pod_security.h); with a gang scheduler, what makes it a member of the job's PodGroup
// (pod_group.h). Its spec.hostname is the replica's name and spec.subdomain the job's Service,
// so the cluster's DNS answers `<replica>.<job>.<namespace>.svc` with the pod's address (as for
// a StatefulSet or JobSet); TF_CONFIG names every replica so.
//
// The Service `<job>` is headless (clusterIP None), selects the job's pods by the job-name label,
// publishes addresses that are not ready yet (peers resolve each other while they start) and
// declares no ports (a headless Service needs none; each replica's port is in TF_CONFIG).
#ifndef PSFLOW_OPERATOR_CONTROLLER_REPLICA_OBJECTS_H_
#define PSFLOW_OPERATOR_CONTROLLER_REPLICA_OBJECTS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "operator/api/training_job.h"
#include "operator/controller/shared_memory_channel.h"

namespace psflow::controller {

inline constexpr char kJobNameLabel[] = "psflow.io/job-name";
inline constexpr char kReplicaTypeLabel[] = "psflow.io/replica-type";    // "ps", "worker", ...
inline constexpr char kReplicaIndexLabel[] = "psflow.io/replica-index";  // "0", "1", ...
inline constexpr char kJobRoleLabel[] = "psflow.io/job-role";            // "chief" on one pod
inline constexpr char kMetricsPortName[] = "metrics";
inline constexpr int kDefaultMetricsPort = 9100;

// "psflow.io/job-name=<job>": selects every object of one job.
std::string JobSelector(const std::string& job_name);
// "psflow.io/job-name=<job>,psflow.io/replica-type=worker" (the scale subresource's selector).
std::string WorkerSelector(const std::string& job_name);

// The ownerReference to the job (controller, blockOwnerDeletion) of every object it owns.
nlohmann::json JobOwnerReference(const nlohmann::json& job_object, const api::TrainingJob& job);

// `job_object` is the TrainingJob as stored (its metadata.uid and spec.replicaSpecs.<T>.template
// are read); `job` is its parsed form.

// `shared_memory_dir`: the node directory of spec.sharedMemory (shared_memory_channel.h).
nlohmann::json BuildPod(const nlohmann::json& job_object, const api::TrainingJob& job,
                        api::ReplicaType type, int index,
                        const std::string& shared_memory_dir = kDefaultSharedMemoryDir);
nlohmann::json BuildService(const nlohmann::json& job_object, const api::TrainingJob& job);

// The job's Service: "<job>".
std::string JobServiceName(const api::TrainingJob& job);
// "<replica>.<job>.<namespace>.svc": the name TF_CONFIG gives a replica.
std::string ReplicaHost(const api::TrainingJob& job, api::ReplicaType type, int index);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_REPLICA_OBJECTS_H_
