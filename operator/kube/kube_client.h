// The Kubernetes API as psflow's operator uses it: typed-enough access to any resource's objects,
// which stay JSON (nlohmann::json) so fields psflow does not model pass through untouched.
//
// Two implementations: RestKubeClient (rest_client.h: HTTP(S) to a real API server with
// cpprestsdk) and the in-memory client of tests/kube (same semantics, no network). Every method
// is thread-safe.
//
// Errors follow api_status.h: NOT_FOUND (404), ALREADY_EXISTS (409 AlreadyExists), ABORTED (409
// Conflict: stale resourceVersion), OUT_OF_RANGE (410 Gone: resourceVersion too old),
// PERMISSION_DENIED (403), UNAUTHENTICATED (401), INVALID_ARGUMENT (400/422), UNAVAILABLE (429,
// 5xx, connection failures), DEADLINE_EXCEEDED (client-side timeout).
#ifndef PSFLOW_OPERATOR_KUBE_KUBE_CLIENT_H_
#define PSFLOW_OPERATOR_KUBE_KUBE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "operator/kube/resource.h"

namespace psflow::kube {

using Json = nlohmann::json;

struct ListOptions {
  // Equality-based selector as Kubernetes writes it: "a=b,c!=d,e" (e: the key exists, !e: it does
  // not). Empty selects everything.
  std::string label_selector;
  // Watch only: events after this version. Empty for List means the latest state.
  std::string resource_version;
  // Watch only: the server ends the watch after this many seconds (0: the server's default).
  int64_t timeout_seconds = 0;
  // Watch only: ask for BOOKMARK events carrying the current resourceVersion.
  bool allow_bookmarks = true;
};

struct ObjectList {
  std::vector<Json> items;
  std::string resource_version;  // the list's metadata.resourceVersion: where a watch continues
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };

struct WatchEvent {
  WatchEventType type;
  Json object;  // for kBookmark only metadata.resourceVersion is meaningful
};

enum class Propagation { kBackground, kForeground, kOrphan };

struct DeleteOptions {
  Propagation propagation = Propagation::kBackground;
  std::string precondition_uid;  // non-empty: delete only the object with this uid (409 otherwise)
  int64_t grace_period_seconds = -1;  // -1: the object's default
};

class KubeClient {
 public:
  virtual ~KubeClient() = default;

  // `ns` is the namespace; empty for cluster-scoped resources or (List/Watch) all namespaces.
  virtual absl::StatusOr<Json> Get(const Resource& resource, absl::string_view ns,
                                   absl::string_view name) = 0;
  virtual absl::StatusOr<ObjectList> List(const Resource& resource, absl::string_view ns,
                                          const ListOptions& options) = 0;

  // Streams the changes after options.resource_version to `on_event`, in order, until the server
  // ends the watch (timeout: returns OK), `stop` is requested (returns CANCELLED), or an error.
  // A watch whose resourceVersion is too old returns OUT_OF_RANGE (410 Gone, whether the server
  // answers 410 or sends an ERROR event): the caller lists again. A dropped connection returns
  // UNAVAILABLE. An event the client cannot parse ends the watch with DATA_LOSS (never a crash).
  virtual absl::Status Watch(const Resource& resource, absl::string_view ns,
                             const ListOptions& options, std::stop_token stop,
                             const std::function<void(const WatchEvent&)>& on_event) = 0;

  // POST: returns the object as stored (uid, resourceVersion, creationTimestamp set).
  virtual absl::StatusOr<Json> Create(const Resource& resource, absl::string_view ns,
                                      const Json& object) = 0;
  // PUT of the whole object; metadata.resourceVersion, when set, must match (ABORTED otherwise).
  // The status of resources with a status subresource is left as stored.
  virtual absl::StatusOr<Json> Update(const Resource& resource, absl::string_view ns,
                                      const Json& object) = 0;
  // PUT .../status: replaces only the status (same resourceVersion rule).
  virtual absl::StatusOr<Json> UpdateStatus(const Resource& resource, absl::string_view ns,
                                            const Json& object) = 0;
  virtual absl::Status Delete(const Resource& resource, absl::string_view ns,
                              absl::string_view name, const DeleteOptions& options) = 0;
};

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_KUBE_CLIENT_H_
