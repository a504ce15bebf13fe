#include "operator/controller/pod_security.h"

#include "operator/controller/pod_volumes.h"

namespace psflow::controller {

using nlohmann::json;

namespace {

// object[key], made an object when missing or not one.
json& ObjectAt(json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_object()) object[key] = json::object();
  return object[key];
}

void Default(json& object, const char* key, json value) {
  if (!object.contains(key)) object[key] = std::move(value);
}

void RestrictContainer(json& container) {
  if (!container.is_object()) return;
  json& context = ObjectAt(container, "securityContext");
  Default(context, "allowPrivilegeEscalation", false);
  Default(context, "capabilities", {{"drop", {"ALL"}}});
}

}  // namespace

void ApplyRestrictedSecurity(json& pod_spec, size_t main_container) {
  json& pod = ObjectAt(pod_spec, "securityContext");
  Default(pod, "runAsNonRoot", true);
  Default(pod, "runAsUser", kImageUid);
  Default(pod, "runAsGroup", kImageUid);
  Default(pod, "fsGroup", kImageUid);
  Default(pod, "seccompProfile", {{"type", "RuntimeDefault"}});
  for (const char* list : {"initContainers", "containers"}) {
    if (!pod_spec.contains(list) || !pod_spec[list].is_array()) continue;
    for (json& container : pod_spec[list]) RestrictContainer(container);
  }
  if (!pod_spec.contains("containers") || main_container >= pod_spec["containers"].size()) return;
  json& main = pod_spec["containers"][main_container];
  if (!main.is_object()) return;
  Default(ObjectAt(main, "securityContext"), "readOnlyRootFilesystem", true);
  if (!MountsAt(main, "/tmp")) {
    SetVolume(pod_spec, {{"name", kTmpVolumeName}, {"emptyDir", json::object()}});
    SetMount(main, kTmpVolumeName, "/tmp");
  }
}

}  // namespace psflow::controller
