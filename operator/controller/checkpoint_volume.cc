#include "operator/controller/checkpoint_volume.h"

#include "absl/strings/str_cat.h"
#include "operator/controller/pod_volumes.h"

namespace psflow::controller {

using nlohmann::json;

void AddCheckpointVolume(const api::CheckpointVolume& checkpoint, json& pod_spec,
                         size_t main_container) {
  json volume = {{"name", kCheckpointVolumeName}};
  if (checkpoint.kind == api::CheckpointVolumeKind::kPersistentVolumeClaim) {
    volume["persistentVolumeClaim"] = {{"claimName", checkpoint.claim_name}};
  } else {
    volume["emptyDir"] = json::object();
    if (!checkpoint.size_limit.empty()) volume["emptyDir"]["sizeLimit"] = checkpoint.size_limit;
  }
  SetVolume(pod_spec, volume);
  if (!pod_spec.contains("containers") || main_container >= pod_spec["containers"].size()) return;
  json& container = pod_spec["containers"][main_container];
  if (!container.is_object()) return;
  SetMount(container, kCheckpointVolumeName, api::kCheckpointMountPath);
  if (!container.contains("args") || !container["args"].is_array()) {
    container["args"] = json::array();
  }
  container["args"].push_back(absl::StrCat("--checkpoint_dir=", api::kCheckpointMountPath));
}

}  // namespace psflow::controller
