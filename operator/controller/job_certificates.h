// A TrainingJob's mutual-TLS certificates, kept in as few Secrets as fit, and how a pod mounts
// only its own.
//
// Secret "<job>-tls" (Opaque) holds the job's CA (ca.crt, ca.key), made the first time the job
// creates pods and kept, so that replicas created later (restarts, scale-up, another operator
// replica after a fail-over) are signed by the same CA; and for each replica of index 0 to
// kReplicasPerSecret - 1 its certificate and key, "<type>-<index>.crt" and "<type>-<index>.key"
// (e.g. worker-3.crt), signed by the CA, its subjectAltName the replica's DNS names
// (ReplicaDnsNames), valid a year (or until the CA ends). Replicas of higher indexes are in
// "<job>-tls-<n>" (n = index / kReplicasPerSecret, with ca.crt but no CA key), so a job of
// thousands of replicas stays within the 1 MiB a Secret holds. A job of up to 200 replicas per
// type thus costs one Secret: one request when its pods are first created.
// Every Secret carries the job-name label and a controller ownerReference to the job, so
// deleting the job deletes them. A Secret of the same name owned by another object (an earlier
// job of the same name being garbage-collected) is never used: UNAVAILABLE, retried.
//
// The pod (BuildPod, when spec.tls.enabled): volume "psflow-tls" of its Secret with `items`
// ca.crt, and its own certificate and key as tls.crt and tls.key (defaultMode 0440: readable by
// the pod's fsGroup, never writable), mounted read-only at kTlsMountPath in the main container,
// whose args gain --tls_ca, --tls_cert and --tls_key. No pod sees the CA key or another
// replica's key.
#ifndef PSFLOW_OPERATOR_CONTROLLER_JOB_CERTIFICATES_H_
#define PSFLOW_OPERATOR_CONTROLLER_JOB_CERTIFICATES_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "core/certificates.h"
#include "operator/api/training_job.h"
#include "operator/kube/kube_client.h"

namespace psflow::controller {

inline constexpr char kTlsMountPath[] = "/etc/psflow/tls";
inline constexpr char kTlsVolumeName[] = "psflow-tls";
inline constexpr int kTlsFileMode = 0440;

inline constexpr int kReplicasPerSecret = 200;

// The Secret holding replica (type, index)'s certificate and key: "<job>-tls" or "<job>-tls-<n>".
std::string TlsSecretName(const api::TrainingJob& job, int index);
// The DNS names the job's Service gives a replica in its namespace, shortest first:
// <replica>.<job>, <replica>.<job>.<ns>, <replica>.<job>.<ns>.svc and .svc.cluster.local.
std::vector<std::string> ReplicaDnsNames(const api::TrainingJob& job, api::ReplicaType type,
                                         int index);

// Adds the volume, the read-only mount and the three flags to a pod spec whose main container is
// `container` (an element of spec.containers).
void MountReplicaCertificates(const api::TrainingJob& job, api::ReplicaType type, int index,
                              nlohmann::json& pod_spec, nlohmann::json& container);

// Makes sure the job's Secrets hold its CA and a certificate for every replica in `replicas`,
// creating or updating them: one Create per Secret when `fresh` (the job has no pods yet, so
// probably no Secret either), else a Get, and an Update (of the data only) where a replica is
// missing (a scale-up) or a later Secret holds another CA's certificates ("<job>-tls" deleted and
// made again: they are all issued again). `job_object` is the TrainingJob as stored (its uid owns
// the Secrets). Returns the names of the Secrets it created and of those it updated. Errors: the
// API's (ABORTED on a conflicting update: retried with the next pass); UNAVAILABLE for a Secret of
// another owner; FAILED_PRECONDITION for a "<job>-tls" that holds no usable CA.
struct SecretsWritten {
  std::vector<std::string> created;
  std::vector<std::string> updated;
};
absl::StatusOr<SecretsWritten> EnsureJobCertificates(
    kube::KubeClient& client, const nlohmann::json& job_object, const api::TrainingJob& job,
    const std::vector<std::pair<api::ReplicaType, int>>& replicas, bool fresh,
    absl::Time now = absl::Now());

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_JOB_CERTIFICATES_H_
