#include "tests/kube/api_path.h"

#include <vector>

#include "absl/strings/str_split.h"

namespace psflow::kubetest {

ApiPath ParseApiPath(absl::string_view path) {
  using Kind = ApiPath::Kind;
  ApiPath out;
  if (path.empty() || path.front() != '/') return out;
  std::vector<std::string> s = absl::StrSplit(path.substr(1), '/');
  if (!s.empty() && s.back().empty()) s.pop_back();  // "/api/v1/" is "/api/v1"
  for (const std::string& segment : s) {
    if (segment.empty()) return out;  // "//"
  }
  if (s.size() == 1 && s[0] == "version") {
    out.kind = Kind::kVersion;
    return out;
  }
  if (s.size() == 1 && (s[0] == "healthz" || s[0] == "livez" || s[0] == "readyz")) {
    out.kind = Kind::kHealth;
    return out;
  }
  size_t rest;  // index of the first segment after the group/version
  if (!s.empty() && s[0] == "api") {
    if (s.size() == 1) {
      out.kind = Kind::kCoreVersions;
      return out;
    }
    out.version = s[1];
    rest = 2;
  } else if (!s.empty() && s[0] == "apis") {
    if (s.size() == 1) {
      out.kind = Kind::kGroupList;
      return out;
    }
    out.group = s[1];
    if (s.size() == 2) {
      out.kind = Kind::kGroup;
      return out;
    }
    out.version = s[2];
    rest = 3;
  } else {
    return out;
  }
  std::vector<std::string> r(s.begin() + static_cast<std::ptrdiff_t>(rest), s.end());
  if (r.empty()) {
    out.kind = Kind::kResourceList;
    return out;
  }
  // .../namespaces/<ns>/<plural>[/<name>[/status]]; "namespaces/<name>" alone is an object of
  // the (cluster-scoped) namespaces resource.
  if (r.size() >= 3 && r[0] == "namespaces") {
    out.ns = r[1];
    r.erase(r.begin(), r.begin() + 2);
  }
  out.plural = r[0];
  if (r.size() == 1) {
    out.kind = Kind::kCollection;
  } else if (r.size() == 2) {
    out.kind = Kind::kObject;
    out.name = r[1];
  } else if (r.size() == 3 && r[2] == "status") {
    out.kind = Kind::kStatus;
    out.name = r[1];
  } else {
    out = ApiPath();  // another subresource (log, exec, scale...): not served
  }
  return out;
}

}  // namespace psflow::kubetest
