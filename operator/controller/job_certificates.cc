#include "operator/controller/job_certificates.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "operator/api/cluster_spec_builder.h"
#include "operator/controller/replica_objects.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

json SecretObject(const json& job_object, const api::TrainingJob& job, const std::string& name,
                  const char* type, const std::vector<std::pair<const char*, std::string>>& data) {
  json secret = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"type", type}};
  secret["metadata"] = {{"name", name},
                        {"namespace", job.namespace_},
                        {"labels", {{kJobNameLabel, job.name}}},
                        {"ownerReferences", json::array({JobOwnerReference(job_object, job)})}};
  json& encoded = secret["data"] = json::object();
  for (const auto& [key, value] : data) encoded[key] = absl::Base64Escape(value);
  return secret;
}

// The stored Secret is this job's (its controller is the job's uid), else UNAVAILABLE.
absl::Status CheckOwner(const json& secret, const json& job_object) {
  if (kube::ControllerUid(secret) == kube::Uid(job_object)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "Secret ", kube::Key(secret), " exists but is not owned by TrainingJob ",
      kube::Key(job_object), " (left by an earlier job of that name?); waiting for it to go"));
}

// data[key], base64-decoded; empty when missing or not base64.
std::string DataAt(const json& secret, const char* key) {
  const std::string encoded = kube::StringAt(secret, "data", key);
  std::string decoded;
  if (!absl::Base64Unescape(encoded, &decoded)) return "";
  return decoded;
}

absl::StatusOr<CertificateAuthority> CaFromSecret(const json& secret) {
  auto ca = CertificateAuthority::FromPem({DataAt(secret, "ca.crt"), DataAt(secret, "ca.key")});
  if (!ca.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Secret ", kube::Key(secret), " holds no usable CA: ", ca.status().message(),
                     "; delete it and the job's <replica>-tls Secrets to make a new CA"));
  }
  return ca;
}

}  // namespace

std::string CaSecretName(const api::TrainingJob& job) { return absl::StrCat(job.name, "-tls-ca"); }

std::string ReplicaSecretName(const api::TrainingJob& job, api::ReplicaType type, int index) {
  return absl::StrCat(api::ReplicaName(job, type, index), "-tls");
}

std::vector<std::string> ServiceDnsNames(const std::string& replica, const std::string& ns) {
  return {replica, absl::StrCat(replica, ".", ns), absl::StrCat(replica, ".", ns, ".svc"),
          absl::StrCat(replica, ".", ns, ".svc.cluster.local")};
}

void MountReplicaCertificates(const api::TrainingJob& job, api::ReplicaType type, int index,
                              json& pod_spec, json& container) {
  auto append = [](json& object, const char* key, json value) {
    if (!object.contains(key) || !object[key].is_array()) object[key] = json::array();
    object[key].push_back(std::move(value));
  };
  append(pod_spec, "volumes",
         {{"name", kTlsVolumeName},
          {"secret",
           {{"secretName", ReplicaSecretName(job, type, index)}, {"defaultMode", kTlsFileMode}}}});
  append(container, "volumeMounts",
         {{"name", kTlsVolumeName}, {"mountPath", kTlsMountPath}, {"readOnly", true}});
  const std::string dir = kTlsMountPath;
  append(container, "args", absl::StrCat("--tls_ca=", dir, "/ca.crt"));
  append(container, "args", absl::StrCat("--tls_cert=", dir, "/tls.crt"));
  append(container, "args", absl::StrCat("--tls_key=", dir, "/tls.key"));
}

absl::StatusOr<JobCertificates> JobCertificates::Load(kube::KubeClient& client,
                                                      const json& job_object,
                                                      const api::TrainingJob& job, absl::Time now) {
  const std::string name = CaSecretName(job);
  // Twice at most: a Secret created by someone else between our Get and Create is read back.
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<json> stored = client.Get(kube::Secrets(), job.namespace_, name);
    if (stored.ok()) {
      RETURN_IF_ERROR(CheckOwner(*stored, job_object));
      ASSIGN_OR_RETURN(CertificateAuthority ca, CaFromSecret(*stored));
      return JobCertificates(job_object, job, std::move(ca));
    }
    if (stored.status().code() != absl::StatusCode::kNotFound) return stored.status();
    ASSIGN_OR_RETURN(CertificateAuthority ca,
                     CertificateAuthority::Create(
                         absl::StrCat("psflow job ", job.namespace_, "/", job.name, " CA"),
                         kDefaultCertificateValidity, now));
    const json secret =
        SecretObject(job_object, job, name, "Opaque",
                     {{"ca.crt", ca.pem().certificate}, {"ca.key", ca.pem().private_key}});
    absl::StatusOr<json> created = client.Create(kube::Secrets(), job.namespace_, secret);
    if (created.ok()) return JobCertificates(job_object, job, std::move(ca));
    if (created.status().code() != absl::StatusCode::kAlreadyExists || attempt > 0) {
      return created.status();
    }
  }
}

absl::Status JobCertificates::EnsureReplicaSecret(kube::KubeClient& client, api::ReplicaType type,
                                                  int index, absl::Time now) const {
  const std::string replica = api::ReplicaName(job_, type, index);
  ASSIGN_OR_RETURN(const PemCertificate leaf,
                   ca_.Issue({.common_name = replica,
                              .dns_names = ServiceDnsNames(replica, job_.namespace_),
                              .ip_addresses = {}},
                             kDefaultCertificateValidity, now));
  const json secret =
      SecretObject(job_object_, job_, ReplicaSecretName(job_, type, index), "kubernetes.io/tls",
                   {{"ca.crt", ca_.pem().certificate},
                    {"tls.crt", leaf.certificate},
                    {"tls.key", leaf.private_key}});
  absl::StatusOr<json> created = client.Create(kube::Secrets(), job_.namespace_, secret);
  if (created.ok()) return absl::OkStatus();
  if (created.status().code() != absl::StatusCode::kAlreadyExists) return created.status();
  // A restart or a cache that lagged: the stored one serves if it is this job's.
  ASSIGN_OR_RETURN(const json stored,
                   client.Get(kube::Secrets(), job_.namespace_, kube::Name(secret)));
  return CheckOwner(stored, job_object_);
}

}  // namespace psflow::controller
