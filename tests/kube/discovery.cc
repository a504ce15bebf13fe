#include "tests/kube/discovery.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace psflow::kubetest {
namespace {

using Json = nlohmann::json;

// The versions of `group`, in registration order (the first is the preferred one).
std::vector<std::string> GroupVersions(const std::vector<ObjectStore::Registered>& resources,
                                       absl::string_view group) {
  std::vector<std::string> versions;
  for (const ObjectStore::Registered& r : resources) {
    if (r.resource.group != group) continue;
    if (std::find(versions.begin(), versions.end(), r.resource.version) == versions.end()) {
      versions.push_back(r.resource.version);
    }
  }
  return versions;
}

Json GroupObject(absl::string_view group, const std::vector<std::string>& versions) {
  Json list = Json::array();
  for (const std::string& v : versions) {
    list.push_back({{"groupVersion", std::string(group) + "/" + v}, {"version", v}});
  }
  return {{"name", group}, {"versions", list}, {"preferredVersion", list[0]}};
}

}  // namespace

Json CoreApiVersions(absl::string_view server_address) {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

Json ApiGroupList(const std::vector<ObjectStore::Registered>& resources) {
  std::vector<std::string> groups;
  for (const ObjectStore::Registered& r : resources) {
    if (!r.resource.group.empty() &&
        std::find(groups.begin(), groups.end(), r.resource.group) == groups.end()) {
      groups.push_back(r.resource.group);
    }
  }
  Json list = Json::array();
  for (const std::string& g : groups) list.push_back(GroupObject(g, GroupVersions(resources, g)));
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", list}};
}

std::optional<Json> ApiGroup(const std::vector<ObjectStore::Registered>& resources,
                             absl::string_view group) {
  const std::vector<std::string> versions = GroupVersions(resources, group);
  if (group.empty() || versions.empty()) return std::nullopt;
  Json out = GroupObject(group, versions);
  out["kind"] = "APIGroup";
  out["apiVersion"] = "v1";
  return out;
}

std::optional<Json> ApiResourceList(const std::vector<ObjectStore::Registered>& resources,
                                    absl::string_view group, absl::string_view version) {
  Json list = Json::array();
  for (const ObjectStore::Registered& r : resources) {
    if (r.resource.group != group || r.resource.version != version) continue;
    list.push_back({{"name", r.resource.plural},
                    {"singularName", absl::AsciiStrToLower(r.resource.kind)},
                    {"namespaced", r.resource.namespaced},
                    {"kind", r.resource.kind},
                    {"verbs", {"create", "delete", "get", "list", "update", "watch"}}});
    if (r.has_status_subresource) {
      list.push_back({{"name", r.resource.plural + "/status"},
                      {"singularName", ""},
                      {"namespaced", r.resource.namespaced},
                      {"kind", r.resource.kind},
                      {"verbs", {"get", "update"}}});
    }
  }
  if (list.empty()) return std::nullopt;
  return Json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", group.empty() ? std::string(version)
                                             : std::string(group) + "/" + std::string(version)},
              {"resources", list}};
}

Json VersionInfo() {
  return {{"major", "1"},    {"minor", "28"},           {"gitVersion", "v1.28.0-psflow-test"},
          {"gitCommit", ""}, {"gitTreeState", "clean"}, {"buildDate", "1970-01-01T00:00:00Z"},
          {"goVersion", ""}, {"compiler", "gc"},        {"platform", "linux/amd64"}};
}

}  // namespace psflow::kubetest
