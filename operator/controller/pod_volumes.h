// Small edits of a pod spec (core/v1 PodSpec as JSON) that add volumes without undoing the
// template's: what the operator adds to a replica's pod besides its env and ports.
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

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_POD_VOLUMES_H_
