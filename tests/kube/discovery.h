// The API server's discovery documents for the resources an ObjectStore serves, as kubectl and
// client libraries read them.
#ifndef PSFLOW_TESTS_KUBE_DISCOVERY_H_
#define PSFLOW_TESTS_KUBE_DISCOVERY_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/kube/object_store.h"

namespace psflow::kubetest {

// GET /api: APIVersions ("v1"); `server_address` is "127.0.0.1:<port>".
nlohmann::json CoreApiVersions(absl::string_view server_address);
// GET /apis: APIGroupList of every registered non-core group.
nlohmann::json ApiGroupList(const std::vector<ObjectStore::Registered>& resources);
// GET /apis/<group>: APIGroup; nullopt (404) when none of the group is registered.
std::optional<nlohmann::json> ApiGroup(const std::vector<ObjectStore::Registered>& resources,
                                       absl::string_view group);
// GET /api/v1 or /apis/<group>/<version>: APIResourceList of the resources and their status
// subresources with the verbs served; nullopt (404) when none of that group/version is
// registered.
std::optional<nlohmann::json> ApiResourceList(const std::vector<ObjectStore::Registered>& resources,
                                              absl::string_view group, absl::string_view version);
// GET /version.
nlohmann::json VersionInfo();

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_DISCOVERY_H_
