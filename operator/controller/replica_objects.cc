#include "operator/controller/replica_objects.h"

#include "absl/strings/str_cat.h"
#include "core/cluster_spec.h"
#include "operator/api/cluster_spec_builder.h"
#include "operator/api/job_policy.h"
#include "operator/controller/checkpoint_volume.h"
#include "operator/controller/job_certificates.h"
#include "operator/controller/job_model.h"
#include "operator/controller/pod_group.h"
#include "operator/controller/pod_security.h"
#include "operator/controller/pod_volumes.h"
#include "operator/controller/shared_memory_channel.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

json Labels(const api::TrainingJob& job, api::ReplicaType type, int index) {
  json labels = {{kJobNameLabel, job.name},
                 {kReplicaTypeLabel, std::string(api::TaskTypeName(type))},
                 {kReplicaIndexLabel, absl::StrCat(index)}};
  if (api::IsChief(job, type, index)) labels[kJobRoleLabel] = "chief";
  return labels;
}

json Metadata(const json& job_object, const api::TrainingJob& job, api::ReplicaType type, int index,
              json base) {
  if (!base.is_object()) base = json::object();
  base["name"] = api::ReplicaName(job, type, index);
  base["namespace"] = job.namespace_;
  if (!base.contains("labels") || !base["labels"].is_object()) base["labels"] = json::object();
  const json labels = Labels(job, type, index);
  for (const auto& [key, value] : labels.items()) base["labels"][key] = value;
  base["ownerReferences"] = json::array({JobOwnerReference(job_object, job)});
  for (const char* server_field : {"uid", "resourceVersion", "creationTimestamp", "generation",
                                   "deletionTimestamp", "generateName", "managedFields"}) {
    base.erase(server_field);
  }
  return base;
}

// Whether `entry` is an object whose "name" is the string `name` (anything else: no).
bool Named(const json& entry, absl::string_view name) {
  if (!entry.is_object()) return false;
  auto it = entry.find("name");
  return it != entry.end() && it->is_string() && it->get_ref<const std::string&>() == name;
}

// The port named `name` on the container, adding it with `default_port` when missing.
int EnsurePort(json& container, const char* name, int default_port) {
  if (!container.contains("ports") || !container["ports"].is_array()) {
    container["ports"] = json::array();
  }
  for (const json& port : container["ports"]) {
    if (Named(port, name) && port.contains("containerPort") &&
        port["containerPort"].is_number_integer()) {
      return port["containerPort"].get<int>();
    }
  }
  container["ports"].push_back(
      {{"name", name}, {"containerPort", default_port}, {"protocol", "TCP"}});
  return default_port;
}

const json& Template(const json& job_object, api::ReplicaType type) {
  static const json* empty = new json(json::object());
  const json* node = &job_object;
  const std::string type_name(api::ReplicaTypeName(type));
  for (const char* key : {"spec", "replicaSpecs", type_name.c_str(), "template"}) {
    if (!node->is_object() || !node->contains(key)) return *empty;
    node = &(*node)[key];
  }
  return node->is_object() ? *node : *empty;
}

}  // namespace

json JobOwnerReference(const json& job_object, const api::TrainingJob& job) {
  return {{"apiVersion", kube::TrainingJobs().ApiVersion()},
          {"kind", kube::TrainingJobs().kind},
          {"name", job.name},
          {"uid", kube::Uid(job_object)},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

std::string JobSelector(const std::string& job_name) {
  return absl::StrCat(kJobNameLabel, "=", job_name);
}

std::string WorkerSelector(const std::string& job_name) {
  return absl::StrCat(JobSelector(job_name), ",", kReplicaTypeLabel, "=",
                      api::TaskTypeName(api::ReplicaType::kWorker));
}

json BuildPod(const json& job_object, const api::TrainingJob& job, api::ReplicaType type, int index,
              const std::string& shared_memory_dir) {
  const json& tmpl = Template(job_object, type);
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] =
      Metadata(job_object, job, type, index, tmpl.contains("metadata") ? tmpl["metadata"] : json());
  json spec = tmpl.contains("spec") && tmpl["spec"].is_object() ? tmpl["spec"] : json::object();
  const api::ReplicaSpec& replica = job.replica_specs.at(type);
  spec["restartPolicy"] = api::PodRestartPolicy(type, replica.restart_policy);
  if (!spec.contains("containers") || !spec["containers"].is_array() ||
      spec["containers"].empty()) {
    spec["containers"] = json::array({json::object()});
  }
  json& containers = spec["containers"];
  size_t main = 0;
  for (size_t i = 0; i < containers.size(); ++i) {
    if (Named(containers[i], "psflow")) main = i;
  }
  json& container = containers[main];
  if (!container.is_object()) container = json::object();

  // The job's Service gives the pod its DNS name (replaces any the template set).
  spec["hostname"] = api::ReplicaName(job, type, index);
  spec["subdomain"] = JobServiceName(job);
  const ClusterSpec cluster = api::BuildClusterSpec(job, [&job](api::ReplicaType t, int i) {
    return absl::StrCat(ReplicaHost(job, t, i), ":", job.replica_specs.at(t).Port());
  });
  EnsurePort(container, api::kPortName, replica.Port());
  if (type == api::ReplicaType::kPS) {
    SetEnv(container, "PSFLOW_BULK_PORT",
           absl::StrCat(EnsurePort(container, api::kBulkPortName, replica.Port() + 1)));
  }
  const int metrics_port = EnsurePort(container, kMetricsPortName, kDefaultMetricsPort);
  SetEnv(container, "TF_CONFIG", ToTfConfig(api::ForTask(cluster, type, index)));
  SetEnv(container, "PSFLOW_JOB_NAME", job.name);
  SetEnv(container, "PSFLOW_NAMESPACE", job.namespace_);
  SetEnv(container, "PSFLOW_REPLICA_TYPE", std::string(api::TaskTypeName(type)));
  SetEnv(container, "PSFLOW_REPLICA_INDEX", absl::StrCat(index));
  SetEnv(container, "PSFLOW_METRICS_PORT", absl::StrCat(metrics_port));
  if (job.tls) MountReplicaCertificates(job, type, index, spec, container);
  if (!job.model_file.empty() && type != api::ReplicaType::kPS) {
    MountModelFile(job, spec, container);
  }
  // Last of the args: its --checkpoint_dir wins over one the template passes.
  if (replica.checkpoint) AddCheckpointVolume(*replica.checkpoint, spec, main);
  if (job.shared_memory.enabled) {
    AddSharedMemoryChannel(shared_memory_dir, kube::Uid(job_object), type, index, spec, main);
  }
  ApplyRestrictedSecurity(spec, main);
  JoinPodGroup(job, type, pod["metadata"], spec);
  JoinKueuePodGroup(job_object, job, pod["metadata"]);
  pod["spec"] = std::move(spec);
  return pod;
}

json BuildService(const json& job_object, const api::TrainingJob& job) {
  json service = {{"apiVersion", "v1"}, {"kind", "Service"}};
  service["metadata"] = {{"name", JobServiceName(job)},
                         {"namespace", job.namespace_},
                         {"labels", {{kJobNameLabel, job.name}}},
                         {"ownerReferences", json::array({JobOwnerReference(job_object, job)})}};
  service["spec"] = {{"clusterIP", "None"},
                     // Peers must resolve each other while they start, before any is ready.
                     {"publishNotReadyAddresses", true},
                     {"selector", {{kJobNameLabel, job.name}}}};
  return service;
}

std::string JobServiceName(const api::TrainingJob& job) { return job.name; }

std::string ReplicaHost(const api::TrainingJob& job, api::ReplicaType type, int index) {
  return absl::StrCat(api::ReplicaName(job, type, index), ".", JobServiceName(job), ".",
                      job.namespace_, ".svc");
}

}  // namespace psflow::controller
