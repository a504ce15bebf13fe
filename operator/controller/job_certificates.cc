#include "operator/controller/job_certificates.h"

#include <map>
#include <optional>

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
                  const std::map<std::string, std::string>& data) {
  json secret = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"type", "Opaque"}};
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
std::string DataAt(const json& secret, const std::string& key) {
  const std::string encoded = kube::StringAt(secret, "data", key.c_str());
  std::string decoded;
  if (!absl::Base64Unescape(encoded, &decoded)) return "";
  return decoded;
}

absl::StatusOr<CertificateAuthority> CaFromSecret(const json& secret) {
  auto ca = CertificateAuthority::FromPem({DataAt(secret, "ca.crt"), DataAt(secret, "ca.key")});
  if (!ca.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Secret ", kube::Key(secret), " holds no usable CA: ", ca.status().message(),
                     "; delete the job's Secrets (label psflow.io/job-name) to make a new CA"));
  }
  return ca;
}

// "worker-3": the stem of a replica's keys in its Secret.
std::string KeyStem(api::ReplicaType type, int index) {
  return absl::StrCat(api::TaskTypeName(type), "-", index);
}

// Adds the certificate and key of each of `replicas` that `data` lacks, issued by `ca`; how many.
absl::StatusOr<int> AddCertificates(const api::TrainingJob& job, const CertificateAuthority& ca,
                                    const std::vector<std::pair<api::ReplicaType, int>>& replicas,
                                    absl::Time now, std::map<std::string, std::string>& data) {
  int added = 0;
  for (const auto& [type, index] : replicas) {
    const std::string stem = KeyStem(type, index);
    if (data.count(stem + ".crt") && data.count(stem + ".key")) continue;
    ASSIGN_OR_RETURN(const PemCertificate leaf,
                     ca.Issue({.common_name = api::ReplicaName(job, type, index),
                               .dns_names = ReplicaDnsNames(job, type, index),
                               .ip_addresses = {}},
                              kDefaultCertificateValidity, now));
    data[stem + ".crt"] = leaf.certificate;
    data[stem + ".key"] = leaf.private_key;
    ++added;
  }
  return added;
}

// One Secret of the job: "<job>-tls" (`holds_ca`: the CA is made here, or read into `ca`) or a
// later one (`ca` already set), made to hold the certificates of `replicas`; its name goes into
// `written` when it is created or updated.
absl::Status EnsureSecret(kube::KubeClient& client, const json& job_object,
                          const api::TrainingJob& job, const std::string& name, bool holds_ca,
                          const std::vector<std::pair<api::ReplicaType, int>>& replicas, bool fresh,
                          absl::Time now, std::optional<CertificateAuthority>& ca,
                          SecretsWritten& written) {
  // Twice at most: a Secret created by someone else between a Get and a Create is read back.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!fresh || attempt > 0) {
      absl::StatusOr<json> stored = client.Get(kube::Secrets(), job.namespace_, name);
      if (stored.ok()) {
        RETURN_IF_ERROR(CheckOwner(*stored, job_object));
        if (holds_ca) {
          ASSIGN_OR_RETURN(CertificateAuthority loaded, CaFromSecret(*stored));
          ca.emplace(std::move(loaded));
        }
        std::map<std::string, std::string> data;
        if (stored->contains("data") && (*stored)["data"].is_object()) {
          for (const auto& [key, value] : (*stored)["data"].items()) {
            data[key] = DataAt(*stored, key);
          }
        }
        // A later Secret whose CA is not the job's (its "<job>-tls" was deleted and made again):
        // its certificates would not be trusted by the others; all of them are issued again.
        const bool other_ca = !holds_ca && data["ca.crt"] != ca->pem().certificate;
        if (other_ca) data = {{"ca.crt", ca->pem().certificate}};
        ASSIGN_OR_RETURN(const int added, AddCertificates(job, *ca, replicas, now, data));
        if (added == 0 && !other_ca) return absl::OkStatus();
        // Only the data changes: labels and annotations others put on it stay.
        json updated = *stored;
        updated["data"] = SecretObject(job_object, job, name, data)["data"];
        RETURN_IF_ERROR(client.Update(kube::Secrets(), job.namespace_, updated).status());
        written.updated.push_back(name);
        return absl::OkStatus();
      }
      if (stored.status().code() != absl::StatusCode::kNotFound) return stored.status();
    }
    std::map<std::string, std::string> data;
    if (holds_ca) {
      ASSIGN_OR_RETURN(CertificateAuthority made,
                       CertificateAuthority::Create(
                           absl::StrCat("psflow job ", job.namespace_, "/", job.name, " CA"),
                           kDefaultCertificateValidity, now));
      ca.emplace(std::move(made));
      data["ca.key"] = ca->pem().private_key;
    }
    data["ca.crt"] = ca->pem().certificate;
    RETURN_IF_ERROR(AddCertificates(job, *ca, replicas, now, data).status());
    absl::StatusOr<json> created =
        client.Create(kube::Secrets(), job.namespace_, SecretObject(job_object, job, name, data));
    if (created.ok()) {
      written.created.push_back(name);
      return absl::OkStatus();
    }
    if (created.status().code() != absl::StatusCode::kAlreadyExists) return created.status();
  }
  return absl::AbortedError(absl::StrCat("Secret ", job.namespace_, "/", name,
                                         " was created and deleted meanwhile; trying again"));
}

}  // namespace

std::string TlsSecretName(const api::TrainingJob& job, int index) {
  const int n = index / kReplicasPerSecret;
  return n == 0 ? absl::StrCat(job.name, "-tls") : absl::StrCat(job.name, "-tls-", n);
}

std::vector<std::string> ReplicaDnsNames(const api::TrainingJob& job, api::ReplicaType type,
                                         int index) {
  const std::string host = absl::StrCat(api::ReplicaName(job, type, index), ".", job.name);
  return {host, absl::StrCat(host, ".", job.namespace_),
          absl::StrCat(host, ".", job.namespace_, ".svc"),
          absl::StrCat(host, ".", job.namespace_, ".svc.cluster.local")};
}

void MountReplicaCertificates(const api::TrainingJob& job, api::ReplicaType type, int index,
                              json& pod_spec, json& container) {
  auto append = [](json& object, const char* key, json value) {
    if (!object.contains(key) || !object[key].is_array()) object[key] = json::array();
    object[key].push_back(std::move(value));
  };
  const std::string stem = KeyStem(type, index);
  append(pod_spec, "volumes",
         {{"name", kTlsVolumeName},
          {"secret",
           {{"secretName", TlsSecretName(job, index)},
            {"items", json::array({{{"key", "ca.crt"}, {"path", "ca.crt"}},
                                   {{"key", stem + ".crt"}, {"path", "tls.crt"}},
                                   {{"key", stem + ".key"}, {"path", "tls.key"}}})},
            {"defaultMode", kTlsFileMode}}}});
  append(container, "volumeMounts",
         {{"name", kTlsVolumeName}, {"mountPath", kTlsMountPath}, {"readOnly", true}});
  const std::string dir = kTlsMountPath;
  append(container, "args", absl::StrCat("--tls_ca=", dir, "/ca.crt"));
  append(container, "args", absl::StrCat("--tls_cert=", dir, "/tls.crt"));
  append(container, "args", absl::StrCat("--tls_key=", dir, "/tls.key"));
}

absl::StatusOr<SecretsWritten> EnsureJobCertificates(
    kube::KubeClient& client, const json& job_object, const api::TrainingJob& job,
    const std::vector<std::pair<api::ReplicaType, int>>& replicas, bool fresh, absl::Time now) {
  std::map<int, std::vector<std::pair<api::ReplicaType, int>>> by_secret;
  by_secret[0];  // the CA's, always
  for (const auto& replica : replicas) {
    by_secret[replica.second / kReplicasPerSecret].push_back(replica);
  }
  std::optional<CertificateAuthority> ca;
  SecretsWritten written;
  for (const auto& [n, in_secret] : by_secret) {  // 0 first: the CA
    RETURN_IF_ERROR(EnsureSecret(client, job_object, job,
                                 TlsSecretName(job, n * kReplicasPerSecret), n == 0, in_secret,
                                 fresh, now, ca, written));
  }
  return written;
}

}  // namespace psflow::controller
