#include "operator/controller/checkpoint_life.h"

#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "operator/controller/pod_state.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

constexpr char kFlag[] = "checkpoint_dir";

const json& At(const json& object, const char* key) {
  static const json* null = new json();
  if (!object.is_object()) return *null;
  auto it = object.find(key);
  return it == object.end() ? *null : *it;
}

// The value the ps takes for --checkpoint_dir from `argv` (the last one given, as absl's flags
// do), nullopt when the flag is not there.
std::optional<std::string> CheckpointDirFlag(const std::vector<std::string>& argv) {
  std::optional<std::string> value;
  for (size_t i = 0; i < argv.size(); ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--")) absl::ConsumePrefix(&arg, "-");
    if (!absl::ConsumePrefix(&arg, kFlag)) continue;
    if (absl::ConsumePrefix(&arg, "=")) {
      value = std::string(arg);
    } else if (arg.empty() && i + 1 < argv.size()) {
      value = argv[++i];
    }
  }
  return value;
}

// "/a/b/" -> "/a/b"; "/" stays.
absl::string_view WithoutTrailingSlash(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path;
}

bool IsUnder(absl::string_view path, absl::string_view mount) {
  path = WithoutTrailingSlash(path);
  mount = WithoutTrailingSlash(mount);
  if (mount == "/") return true;
  return path == mount || (absl::StartsWith(path, mount) && path[mount.size()] == '/');
}

// What a volume of the pod's spec outlives, and how messages name it.
PsCheckpoints VolumeLife(const json& volume, const std::string& name) {
  for (const char* read_only : {"configMap", "secret", "downwardAPI", "projected"}) {
    if (volume.contains(read_only)) {
      return {CheckpointLife::kNone, absl::StrCat("read-only ", read_only, " volume ", name)};
    }
  }
  for (const char* pods_own : {"emptyDir", "ephemeral", "csi", "hostPath"}) {
    if (volume.contains(pods_own)) {
      return {CheckpointLife::kPod, absl::StrCat(pods_own, " volume ", name)};
    }
  }
  if (volume.contains("persistentVolumeClaim")) {
    return {CheckpointLife::kBeyondPod,
            absl::StrCat("persistentVolumeClaim ",
                         kube::StringField(volume["persistentVolumeClaim"], "claimName"),
                         " (volume ", name, ")")};
  }
  return {CheckpointLife::kBeyondPod, absl::StrCat("volume ", name)};
}

}  // namespace

PsCheckpoints ReadPsCheckpoints(const json& pod) {
  const json& spec = At(pod, "spec");
  const std::string main = MainContainerName(pod);
  const json* container = nullptr;
  if (const json& containers = At(spec, "containers"); containers.is_array()) {
    for (const json& c : containers) {
      if (c.is_object() && kube::StringField(c, "name") == main) {
        container = &c;
        break;
      }
    }
  }
  if (container == nullptr) return {CheckpointLife::kNone, "no --checkpoint_dir"};
  std::vector<std::string> argv;
  for (const char* list : {"command", "args"}) {
    if (const json& items = At(*container, list); items.is_array()) {
      for (const json& item : items) {
        if (item.is_string()) argv.push_back(item.get<std::string>());
      }
    }
  }
  const std::optional<std::string> dir = CheckpointDirFlag(argv);
  if (!dir || dir->empty()) return {CheckpointLife::kNone, "no --checkpoint_dir"};
  const std::string flag = absl::StrCat("--checkpoint_dir=", *dir);

  // The deepest mount above the folder holds it.
  const json* mount = nullptr;
  size_t depth = 0;
  if (const json& mounts = At(*container, "volumeMounts"); mounts.is_array() && (*dir)[0] == '/') {
    for (const json& m : mounts) {
      const std::string path = kube::StringField(m, "mountPath");
      if (path.empty() || !IsUnder(*dir, path)) continue;
      if (mount == nullptr || path.size() > depth) {
        mount = &m;
        depth = path.size();
      }
    }
  }
  if (mount == nullptr) {
    return {CheckpointLife::kNone, absl::StrCat(flag, " on the container's own filesystem")};
  }
  const std::string name = kube::StringField(*mount, "name");
  if (const json& read_only = At(*mount, "readOnly");
      read_only.is_boolean() && read_only.get<bool>()) {
    return {CheckpointLife::kNone, absl::StrCat(flag, " on read-only mount ", name)};
  }
  if (const json& volumes = At(spec, "volumes"); volumes.is_array()) {
    for (const json& volume : volumes) {
      if (!volume.is_object() || kube::StringField(volume, "name") != name) continue;
      PsCheckpoints found = VolumeLife(volume, name);
      found.where = absl::StrCat(flag, " on ", found.where);
      return found;
    }
  }
  // A mount of no volume: the API server refuses such a pod.
  return {CheckpointLife::kNone, absl::StrCat(flag, " on unknown volume ", name)};
}

}  // namespace psflow::controller
