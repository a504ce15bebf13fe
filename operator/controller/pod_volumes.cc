#include "operator/controller/pod_volumes.h"

namespace psflow::controller {

using nlohmann::json;

namespace {

// spec[key] as an array, made one when missing or not an array.
json& ArrayAt(json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_array()) object[key] = json::array();
  return object[key];
}

// Removes the entries whose `field` is the string `value`.
void EraseWhere(json& list, const char* field, const std::string& value) {
  for (auto it = list.begin(); it != list.end();) {
    if (it->is_object() && it->contains(field) && (*it)[field] == value) {
      it = list.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

void SetVolume(json& pod_spec, const json& volume) {
  json& volumes = ArrayAt(pod_spec, "volumes");
  EraseWhere(volumes, "name", volume.value("name", ""));
  volumes.push_back(volume);
}

bool MountsAt(const json& container, const std::string& mount_path) {
  if (!container.contains("volumeMounts") || !container["volumeMounts"].is_array()) return false;
  for (const json& mount : container["volumeMounts"]) {
    if (mount.is_object() && mount.contains("mountPath") && mount["mountPath"] == mount_path) {
      return true;
    }
  }
  return false;
}

void SetMount(json& container, const std::string& volume_name, const std::string& mount_path) {
  json& mounts = ArrayAt(container, "volumeMounts");
  EraseWhere(mounts, "mountPath", mount_path);
  mounts.push_back({{"name", volume_name}, {"mountPath", mount_path}});
}

void SetFirstInitContainer(json& pod_spec, const json& container) {
  json& inits = ArrayAt(pod_spec, "initContainers");
  EraseWhere(inits, "name", container.value("name", ""));
  inits.insert(inits.begin(), container);
}

void SetEnv(json& container, const std::string& name, const std::string& value) {
  json& env = ArrayAt(container, "env");
  EraseWhere(env, "name", name);
  env.push_back({{"name", name}, {"value", value}});
}

}  // namespace psflow::controller
