// What a Kubernetes API request path names: a discovery document or a resource's collection,
// object or status subresource.
#ifndef PSFLOW_TESTS_KUBE_API_PATH_H_
#define PSFLOW_TESTS_KUBE_API_PATH_H_

#include <string>

#include "absl/strings/string_view.h"

namespace psflow::kubetest {

struct ApiPath {
  enum class Kind {
    kUnknown,
    kVersion,       // /version
    kHealth,        // /healthz, /livez, /readyz
    kCoreVersions,  // /api
    kGroupList,     // /apis
    kGroup,         // /apis/<group>
    kResourceList,  // /api/v1, /apis/<group>/<version>
    kCollection,    // .../<plural> or .../namespaces/<ns>/<plural>
    kObject,        // .../<plural>/<name>
    kStatus,        // .../<plural>/<name>/status
  };
  Kind kind = Kind::kUnknown;
  std::string group;  // "" for the core group
  std::string version;
  std::string ns;  // "" when the path names no namespace
  std::string plural;
  std::string name;
};

// `path` is percent-decoded and has no query. A trailing slash is ignored.
ApiPath ParseApiPath(absl::string_view path);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_API_PATH_H_
