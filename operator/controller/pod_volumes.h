// Small edits of a pod spec (core/v1 PodSpec as JSON) and its containers that add volumes and env
// without undoing the rest of the template's: what the operator adds to a replica's pod.
#ifndef PSFLOW_OPERATOR_CONTROLLER_POD_VOLUMES_H_
#define PSFLOW_OPERATOR_CONTROLLER_POD_VOLUMES_H_

#include <nlohmann/json.hpp>
#include <string>

namespace psflow::controller {

// Adds `volume` (an object with its "name") to spec.volumes, replacing one of the same name.
void SetVolume(nlohmann::json& pod_spec, const nlohmann::json& volume);

// Whether the container mounts something at `mount_path`.
bool MountsAt(const nlohmann::json& container, const std::string& mount_path);

// Mounts volume `volume_name` at `mount_path` in the container, replacing any mount there.
void SetMount(nlohmann::json& container, const std::string& volume_name,
              const std::string& mount_path);

// Puts `container` (an object with its "name") first among spec.initContainers, replacing one of
// the same name: it runs before the template's own.
void SetFirstInitContainer(nlohmann::json& pod_spec, const nlohmann::json& container);

// Sets env `name` on the container, replacing any value the template gave it.
void SetEnv(nlohmann::json& container, const std::string& name, const std::string& value);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_POD_VOLUMES_H_
