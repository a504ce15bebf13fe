#include "operator/controller/shared_memory_channel.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "operator/controller/pod_volumes.h"

namespace psflow::controller {

using nlohmann::json;

absl::Status CheckSharedMemoryDir(const std::string& dir) {
  bool plain = dir.size() > 1 && dir[0] == '/';
  if (plain) {
    for (absl::string_view part : absl::StrSplit(absl::string_view(dir).substr(1), '/')) {
      if (part == "." || part == "..") plain = false;
    }
  }
  if (plain) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the shared-memory directory must be an absolute path below / without . or .. parts, not \"",
      dir, "\""));
}

std::string BulkSocketPath(int ps_index) {
  return absl::StrCat(kBulkSocketDir, "/ps-", ps_index, ".sock");
}

void AddSharedMemoryChannel(const std::string& node_dir, const std::string& job_uid,
                            api::ReplicaType type, int index, json& pod_spec,
                            size_t main_container) {
  json& main = pod_spec["containers"][main_container];
  SetVolume(pod_spec, {{"name", kSharedMemoryVolumeName},
                       {"hostPath",
                        {{"path", absl::StrCat(absl::StripSuffix(node_dir, "/"), "/", job_uid)},
                         {"type", "DirectoryOrCreate"}}}});
  SetMount(main, kSharedMemoryVolumeName, kBulkSocketDir);
  if (type != api::ReplicaType::kPS) return;
  SetEnv(main, "PSFLOW_BULK_SOCKET", BulkSocketPath(index));
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
  SetFirstInitContainer(pod_spec, init);  // before the template's, which may need the socket
}

}  // namespace psflow::controller
