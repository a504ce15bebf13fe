#include "operator/controller/pod_group.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "operator/api/quantity.h"
#include "operator/controller/replica_objects.h"
#include "operator/kube/resource.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

const json* At(const json& node, const char* key) {
  if (!node.is_object()) return nullptr;
  auto it = node.find(key);
  return it == node.end() ? nullptr : &*it;
}

// Adds `replicas` times each container's requests (a limit where the request is missing) to
// `sum`, in thousandths.
absl::Status AddRequests(const json& job_object, api::ReplicaType type, int replicas,
                         std::map<std::string, int64_t>& sum) {
  const std::string type_name(api::ReplicaTypeName(type));
  const json* node = &job_object;
  for (const char* key :
       {"spec", "replicaSpecs", type_name.c_str(), "template", "spec", "containers"}) {
    node = At(*node, key);
    if (node == nullptr) return absl::OkStatus();
  }
  if (!node->is_array()) return absl::OkStatus();
  for (size_t c = 0; c < node->size(); ++c) {
    const json* resources = At((*node)[c], "resources");
    if (resources == nullptr) continue;
    std::map<std::string, std::pair<std::string, std::string>>
        per_resource;                                   // name -> (text, field)
    for (const char* field : {"limits", "requests"}) {  // requests last: they win
      const json* list = At(*resources, field);
      if (list == nullptr || !list->is_object()) continue;
      for (const auto& [name, value] : list->items()) {
        std::string text = value.is_string()   ? value.get<std::string>()
                           : value.is_number() ? value.dump()
                                               : "";
        per_resource[name] = {text, field};
      }
    }
    for (const auto& [name, entry] : per_resource) {
      absl::StatusOr<int64_t> milli = api::ParseMilliQuantity(entry.first);
      if (!milli.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("spec.replicaSpecs.", type_name, ".template.spec.containers[", c,
                         "].resources.", entry.second, ".", name, ": ", milli.status().message()));
      }
      sum[name] += *milli * replicas;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<json> BuildPodGroup(const json& job_object, const api::TrainingJob& job) {
  const api::SchedulingPolicy& policy = job.run_policy.scheduling;
  const bool volcano = policy.gang == api::GangScheduler::kVolcano;
  int members = 0;
  json tasks = json::object();
  std::map<std::string, int64_t> resources;
  for (const auto& [type, spec] : job.replica_specs) {
    if (spec.replicas == 0) continue;
    members += spec.replicas;
    tasks[std::string(api::TaskTypeName(type))] = spec.replicas;
    RETURN_IF_ERROR(AddRequests(job_object, type, spec.replicas, resources));
  }
  json spec = {{"minMember", members}};
  if (!resources.empty()) {
    json& min_resources = spec["minResources"] = json::object();
    for (const auto& [name, milli] : resources) {
      min_resources[name] = api::FormatMilliQuantity(milli);
    }
  }
  if (volcano) {
    spec["minTaskMember"] = std::move(tasks);
    if (!policy.queue.empty()) spec["queue"] = policy.queue;
    if (!policy.priority_class.empty()) spec["priorityClassName"] = policy.priority_class;
  } else if (job.run_policy.scheduling_timeout_seconds) {
    spec["scheduleTimeoutSeconds"] = *job.run_policy.scheduling_timeout_seconds;
  }
  const kube::Resource& resource =
      volcano ? kube::VolcanoPodGroups() : kube::CoschedulingPodGroups();
  return json{{"apiVersion", resource.ApiVersion()},
              {"kind", resource.kind},
              {"metadata",
               {{"name", job.name},
                {"namespace", job.namespace_},
                {"labels", {{kJobNameLabel, job.name}}},
                {"ownerReferences", json::array({JobOwnerReference(job_object, job)})}}},
              {"spec", std::move(spec)}};
}

void JoinPodGroup(const api::TrainingJob& job, api::ReplicaType type, json& metadata,
                  json& pod_spec) {
  const api::SchedulingPolicy& policy = job.run_policy.scheduling;
  if (policy.gang == api::GangScheduler::kNone) return;
  pod_spec["schedulerName"] = policy.SchedulerName();
  if (policy.gang == api::GangScheduler::kCoscheduling) {
    metadata["labels"][kCoschedulingLabel] = job.name;
    return;
  }
  json& annotations = metadata["annotations"];
  if (!annotations.is_object()) annotations = json::object();
  annotations[kVolcanoGroupAnnotation] = job.name;
  annotations[kVolcanoTaskAnnotation] = std::string(api::TaskTypeName(type));
  if (!policy.queue.empty()) annotations[kVolcanoQueueAnnotation] = policy.queue;
}

void JoinKueuePodGroup(const json& job_object, const api::TrainingJob& job, json& metadata) {
  const json* job_metadata = At(job_object, "metadata");
  const json* labels = job_metadata == nullptr ? nullptr : At(*job_metadata, "labels");
  const json* queue = labels == nullptr ? nullptr : At(*labels, kKueueQueueLabel);
  if (queue == nullptr || !queue->is_string() || queue->get_ref<const std::string&>().empty()) {
    return;
  }
  int total = 0;
  for (const auto& [type, spec] : job.replica_specs) total += spec.replicas;
  if (!metadata["labels"].is_object()) metadata["labels"] = json::object();
  metadata["labels"][kKueueQueueLabel] = *queue;
  metadata["labels"][kKueueGroupLabel] = job.name;
  if (!metadata["annotations"].is_object()) metadata["annotations"] = json::object();
  metadata["annotations"][kKueueGroupCountAnnotation] = absl::StrCat(total);
}

}  // namespace psflow::controller
