// A TrainingJob's mutual-TLS certificates as Secrets, and how a pod gets its own.
//
// Per job, Secret "<job>-tls-ca" (Opaque; ca.crt, ca.key): a CA made for the job the first time
// one of its pods is created, kept so that replicas created later (restarts, scale-up, another
// operator replica after a fail-over) are signed by the same CA. It is never mounted: no pod can
// read the CA key.
// Per replica, Secret "<job>-<type>-<index>-tls" (kubernetes.io/tls; ca.crt, tls.crt, tls.key):
// the job CA's certificate and the replica's own certificate and key, its subjectAltName the
// replica's Service DNS names (<replica>, <replica>.<ns>, <replica>.<ns>.svc,
// <replica>.<ns>.svc.cluster.local), valid a year (or until the CA ends). One Secret per
// replica rather than one per job: a pod mounts only its own key, and a job of 1111 replicas
// would not fit the 1 MiB a Secret holds.
// Every Secret carries the job-name label and a controller ownerReference to the job, so
// deleting the job deletes them. A Secret of the same name owned by another object (an earlier
// job of the same name being garbage-collected) is never used: UNAVAILABLE, retried.
//
// The pod (BuildPod, when spec.tls.enabled): volume "psflow-tls" of its replica's Secret
// (defaultMode 0440: readable by the pod's fsGroup, never writable), mounted read-only at
// kTlsMountPath in the main container, whose args gain --tls_ca, --tls_cert and --tls_key.
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

std::string CaSecretName(const api::TrainingJob& job);
std::string ReplicaSecretName(const api::TrainingJob& job, api::ReplicaType type, int index);
// The DNS names a replica's Service gives it in namespace `ns`, shortest first.
std::vector<std::string> ServiceDnsNames(const std::string& replica, const std::string& ns);

// Adds the volume, the read-only mount and the three flags to a pod spec whose main container is
// `container` (an element of spec.containers).
void MountReplicaCertificates(const api::TrainingJob& job, api::ReplicaType type, int index,
                              nlohmann::json& pod_spec, nlohmann::json& container);

class JobCertificates {
 public:
  // The job's CA from its Secret, made and stored first when there is none. `job_object` is the
  // TrainingJob as stored (its uid owns the Secrets); it and `job` must outlive the result.
  // Errors: the API's; UNAVAILABLE for a Secret of another owner; FAILED_PRECONDITION for a CA
  // Secret that holds no usable CA.
  static absl::StatusOr<JobCertificates> Load(kube::KubeClient& client,
                                              const nlohmann::json& job_object,
                                              const api::TrainingJob& job,
                                              absl::Time now = absl::Now());

  // Creates the replica's Secret, signed by the job's CA, unless this job has it already.
  // Thread-safe (calls in parallel for different replicas are fine).
  absl::Status EnsureReplicaSecret(kube::KubeClient& client, api::ReplicaType type, int index,
                                   absl::Time now = absl::Now()) const;

  const CertificateAuthority& ca() const { return ca_; }

 private:
  JobCertificates(const nlohmann::json& job_object, const api::TrainingJob& job,
                  CertificateAuthority ca)
      : job_object_(job_object), job_(job), ca_(std::move(ca)) {}

  const nlohmann::json& job_object_;
  const api::TrainingJob& job_;
  CertificateAuthority ca_;
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_JOB_CERTIFICATES_H_
