#include "operator/controller/shared_memory_channel.h"

#include "absl/strings/str_cat.h"
#include "operator/controller/pod_volumes.h"

namespace psflow::controller {

using nlohmann::json;

std::string BulkSocketPath(const std::string& job_uid, int ps_index) {
  return absl::StrCat(kBulkSocketDir, "/", job_uid, "-ps-", ps_index, ".sock");
}

void AddSharedMemoryChannel(const api::SharedMemorySpec& shared_memory, const std::string& job_uid,
                            api::ReplicaType type, int index, json& pod_spec,
                            size_t main_container) {
  json& main = pod_spec["containers"][main_container];
  SetVolume(pod_spec,
            {{"name", kSharedMemoryVolumeName},
             {"hostPath", {{"path", shared_memory.host_path}, {"type", "DirectoryOrCreate"}}}});
  SetMount(main, kSharedMemoryVolumeName, kBulkSocketDir);
  if (type != api::ReplicaType::kPS) return;
  SetEnv(main, "PSFLOW_BULK_SOCKET", BulkSocketPath(job_uid, index));
  json init = {{"name", kSharedMemoryVolumeName},
               {"image", main.value("image", "")},
               {"command", {"chmod", "1777", kBulkSocketDir}},
               {"volumeMounts",
                json::array({{{"name", kSharedMemoryVolumeName}, {"mountPath", kBulkSocketDir}}})},
               {"securityContext",
                {{"runAsUser", 0},
                 {"runAsNonRoot", false},
                 {"allowPrivilegeEscalation", false},
                 {"readOnlyRootFilesystem", true},
                 {"capabilities", {{"drop", {"ALL"}}}}}}};
  if (main.contains("imagePullPolicy")) init["imagePullPolicy"] = main["imagePullPolicy"];
  if (!pod_spec.contains("initContainers") || !pod_spec["initContainers"].is_array()) {
    pod_spec["initContainers"] = json::array();
  }
  json& inits = pod_spec["initContainers"];
  for (auto it = inits.begin(); it != inits.end();) {
    if (it->is_object() && it->value("name", "") == kSharedMemoryVolumeName) {
      it = inits.erase(it);
    } else {
      ++it;
    }
  }
  inits.insert(inits.begin(), std::move(init));  // before the template's, which may need it
}

}  // namespace psflow::controller
