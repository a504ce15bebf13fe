#include "operator/controller/job_model.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "operator/controller/replica_objects.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"

namespace psflow::controller {

using json = nlohmann::json;

std::string ModelConfigMapName(const api::TrainingJob& job) {
  return absl::StrCat(job.name, "-model");
}

json BuildModelConfigMap(const json& job_object, const api::TrainingJob& job) {
  json map = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}};
  map["metadata"] = {{"name", ModelConfigMapName(job)},
                     {"namespace", job.namespace_},
                     {"labels", {{kJobNameLabel, job.name}}},
                     {"ownerReferences", json::array({JobOwnerReference(job_object, job)})}};
  map["data"] = {{kModelFileKey, job.model_file}};
  return map;
}

absl::Status EnsureModelConfigMap(kube::KubeClient& client, const json& job_object,
                                  const api::TrainingJob& job) {
  const json wanted = BuildModelConfigMap(job_object, job);
  absl::StatusOr<json> created = client.Create(kube::ConfigMaps(), job.namespace_, wanted);
  if (created.ok()) return absl::OkStatus();
  if (created.status().code() != absl::StatusCode::kAlreadyExists) return created.status();
  ASSIGN_OR_RETURN(json stored, client.Get(kube::ConfigMaps(), job.namespace_, kube::Name(wanted)));
  if (kube::ControllerUid(stored) != kube::Uid(job_object)) {
    return absl::UnavailableError(absl::StrCat(
        "ConfigMap ", kube::Key(stored), " exists but is not owned by TrainingJob ",
        kube::Key(job_object), " (left by an earlier job of that name?); waiting for it to go"));
  }
  if (kube::StringAt(stored, "data", kModelFileKey) == job.model_file) return absl::OkStatus();
  stored["data"] = wanted["data"];
  return client.Update(kube::ConfigMaps(), job.namespace_, stored).status();
}

void MountModelFile(const api::TrainingJob& job, json& pod_spec, json& container) {
  auto append = [](json& object, const char* key, json value) {
    if (!object.contains(key) || !object[key].is_array()) object[key] = json::array();
    object[key].push_back(std::move(value));
  };
  append(pod_spec, "volumes",
         {{"name", kModelVolumeName}, {"configMap", {{"name", ModelConfigMapName(job)}}}});
  append(container, "volumeMounts",
         {{"name", kModelVolumeName}, {"mountPath", kModelMountPath}, {"readOnly", true}});
  append(container, "args", absl::StrCat("--model_file=", kModelMountPath, "/", kModelFileKey));
}

}  // namespace psflow::controller
