// ObjectStore: the Kubernetes API server's storage semantics in memory, with no network. The
// test API server (test_api_server.h) serves it over HTTP; MemoryKubeClient
// (memory_kube_client.h) over the KubeClient interface.
//
// What it does as the API server does:
//   - objects of registered resources only; any other resource is NOT_FOUND ("the server could
//     not find the requested resource"), as when a CRD is missing;
//   - create: uid (random UUID v4), metadata.resourceVersion, creationTimestamp (RFC 3339, UTC,
//     from Options::clock), generation 1, generateName, name validation (DNS-1123 subdomain;
//     DNS-1035 label for services), kind/apiVersion filled in (INVALID_ARGUMENT if they differ
//     from the resource's), status dropped for resources with a status subresource (a pod starts
//     Pending);
//   - one resourceVersion counter for every resource, incremented by each write and carried by
//     lists; a write that changes nothing (a no-op update) keeps the version and emits nothing;
//   - update: optimistic concurrency on metadata.resourceVersion (ABORTED, 409 Conflict), uid
//     and creationTimestamp kept, the status kept for resources with a status subresource
//     (UpdateStatus changes only the status), generation + 1 when anything outside metadata and
//     status changes;
//   - delete: uid precondition; metadata.finalizers (the object gets a deletionTimestamp and
//     goes once an update empties its finalizers); garbage collection of dependents by
//     metadata.ownerReferences (Background/Foreground: deleted, recursively, unless another
//     owner still exists, which only loses the reference; Orphan: the reference is removed).
//     The real garbage collector is asynchronous; here it runs inside the Delete call, so a
//     watch sees the dependents' events right after the owner's (Foreground: before it);
//   - watch: the initial state as ADDED events (resourceVersion "" or "0") or every change after
//     a resourceVersion, replayed from a bounded history (Options::history_window changes, for
//     all resources together, as etcd keeps them); older versions are OUT_OF_RANGE (410 Gone);
//     label-selector watches see ADDED/DELETED as objects start/stop matching; bookmarks;
//     timeouts.
// What it does not do: namespaces as objects (any namespace exists), field selectors, PATCH,
// defaulting beyond the above, graceful pod deletion (a deleted pod goes at once, as if the
// kubelet had confirmed), admission.
//
// Thread-safe: every method may be called from any thread. Writes are serialized.
#ifndef PSFLOW_TESTS_KUBE_OBJECT_STORE_H_
#define PSFLOW_TESTS_KUBE_OBJECT_STORE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/resource.h"
#include "tests/kube/object_naming.h"
#include "tests/kube/watcher.h"

namespace psflow::kubetest {

class ObjectStore {
 public:
  struct Options {
    // Time for creationTimestamp, deletionTimestamp and the kubelet stand-ins' timestamps;
    // called with the store's lock held (it must not call the store). Watch timeouts and
    // bookmarks use the real (steady) clock.
    std::function<absl::Time()> clock = [] { return absl::Now(); };
    // Changes kept for watches that resume from a resourceVersion.
    size_t history_window = 1000;
    // Between BOOKMARK events of watches that ask for them.
    std::chrono::milliseconds bookmark_interval{1000};
    // The length of a watch that asks for none (timeout_seconds 0). The API server's is
    // --min-request-timeout (30 min) or more.
    std::chrono::seconds default_watch_timeout{1800};
    // A watcher this many events behind when a change comes is ended (its consumer watches
    // again); the initial state of a watch from "0" may be longer.
    size_t max_pending_events = 10000;
    // Seeds uids and generated names; 0 draws a random seed.
    uint64_t seed = 0;
  };

  // A registered resource, as discovery lists it.
  struct Registered {
    kube::Resource resource;
    bool has_status_subresource = false;
  };

  ObjectStore() : ObjectStore(Options()) {}
  explicit ObjectStore(Options options);
  // Ends every open watch (their Watchers may outlive the store).
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // --- Resources (the CRDs installed) ---
  // Serves `resource` from now on; registering it again changes only has_status_subresource.
  void RegisterResource(const kube::Resource& resource, bool has_status_subresource);
  // pods and services (with a status subresource), secrets, events and leases (without).
  void RegisterBuiltins();
  // As deleting a CRD: its objects are deleted (DELETED events; their dependents are garbage
  // collected; finalizers are not waited for), open watches of it end, and requests for it are
  // NOT_FOUND again.
  void UnregisterResource(const kube::Resource& resource);
  std::vector<Registered> Resources() const;
  std::optional<Registered> FindResource(absl::string_view group, absl::string_view version,
                                         absl::string_view plural) const;

  // --- The API (as kube::KubeClient; `ns` as there) ---
  absl::StatusOr<Json> Get(const kube::Resource& resource, absl::string_view ns,
                           absl::string_view name);
  // Items in namespace/name order; the list's resourceVersion is the store's current one.
  // options.resource_version is ignored (the latest state is always served). INVALID_ARGUMENT
  // for a bad label selector.
  absl::StatusOr<kube::ObjectList> List(const kube::Resource& resource, absl::string_view ns,
                                        const kube::ListOptions& options);
  // Opens a watch (see Watcher). OUT_OF_RANGE when options.resource_version is older than the
  // history kept; INVALID_ARGUMENT for a bad selector or resourceVersion. A version newer than
  // the store's is allowed: the watch waits for it.
  absl::StatusOr<std::unique_ptr<Watcher>> Watch(const kube::Resource& resource,
                                                 absl::string_view ns,
                                                 const kube::ListOptions& options);
  // The object as stored. The body's metadata.namespace, when set, must equal `ns`.
  absl::StatusOr<Json> Create(const kube::Resource& resource, absl::string_view ns,
                              const Json& object);
  absl::StatusOr<Json> Update(const kube::Resource& resource, absl::string_view ns,
                              const Json& object);
  // NOT_FOUND for a resource without a status subresource.
  absl::StatusOr<Json> UpdateStatus(const kube::Resource& resource, absl::string_view ns,
                                    const Json& object);
  // Unlike KubeClient::Delete, returns the object: as it was when it went, or with its
  // deletionTimestamp when finalizers keep it (the body the API server answers with).
  // options.grace_period_seconds is ignored.
  absl::StatusOr<Json> Delete(const kube::Resource& resource, absl::string_view ns,
                              absl::string_view name, const kube::DeleteOptions& options);

  // --- Test controls ---
  // Drops the whole history, as an etcd compaction: a watch from any earlier resourceVersion
  // is OUT_OF_RANGE, and every open watch ends with OUT_OF_RANGE (clients list again).
  void Compact();
  // Ends every open watch gracefully, as an API server restart does (clients watch again from
  // their last resourceVersion).
  void CloseWatches();
  // Called with the object as it would be stored on every create, update and status update of
  // `resource`; a non-OK result is returned instead of the write. Empty function: none. Called
  // with the store's lock held: it must not call the store.
  void SetValidator(const kube::Resource& resource,
                    std::function<absl::Status(const Json&)> validator);
  // Committed writes (each made a new resourceVersion), the kubelet stand-ins' included.
  int64_t WriteCount() const;
  // Calls of one verb (verbs.h), successful or not; the kubelet stand-ins are not counted.
  int64_t OperationCount(absl::string_view verb) const;
  // The latest resourceVersion.
  int64_t CurrentResourceVersion() const;
  // Watches not yet ended.
  size_t OpenWatchCount() const;

  // --- Kubelet stand-ins (pod_status.h says what they write), on the node kMemoryNodeName: a pod
  // not bound yet is bound to it (spec.nodeName) as its first status is written ---
  static constexpr char kMemoryNodeName[] = "memory-node";
  // Writes the status pod `ns`/`name` has in `phase`; returns the pod as stored.
  absl::StatusOr<Json> SetPodPhase(absl::string_view ns, absl::string_view name,
                                   absl::string_view phase, int exit_code = 0,
                                   absl::string_view reason = "");
  // Records a restart of `container` ("" for the first) after it exited with `exit_code`, as the
  // kubelet does for restartPolicy Always/OnFailure.
  absl::StatusOr<Json> RestartContainer(absl::string_view ns, absl::string_view name, int exit_code,
                                        absl::string_view reason, absl::string_view container = "");

 private:
  struct Entry {
    Json object;
    // Chosen by the Delete that set the deletionTimestamp; applied when the object goes.
    kube::Propagation propagation = kube::Propagation::kBackground;
  };
  struct ResourceState {
    Registered registered;
    NameRule name_rule = NameRule::kSubdomain;
    std::map<std::string, Entry> objects;  // by "<namespace>/<name>"
  };

  void Count(absl::string_view verb) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ResourceState*> FindLocked(const kube::Resource& resource)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ValidateLocked(const ResourceState& state, const Json& object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Json> UpdateLocked(ResourceState& state, absl::string_view ns, const Json& body,
                                    bool status_only) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Json> SetPodStatusLocked(
      absl::string_view ns, absl::string_view name,
      const std::function<absl::StatusOr<Json>(const Json&)>& make_status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes (or, with finalizers, marks for deletion) objects[key] of `state`.
  Json DeleteLocked(ResourceState& state, const std::string& key, kube::Propagation propagation,
                    std::set<std::string>& removing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes objects[key] now and garbage-collects its dependents.
  Json RemoveLocked(ResourceState& state, const std::string& key, kube::Propagation propagation,
                    std::set<std::string>& removing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CollectDependentsLocked(const std::string& owner_uid, kube::Propagation propagation,
                               std::set<std::string>& removing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool UidExistsLocked(const std::string& uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replaces entry.object by `next` (a new resourceVersion, a MODIFIED change).
  void ReplaceLocked(const ResourceState& state, Entry& entry, Json next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t NewVersionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps a committed `change` in the history and hands it to the open watches.
  void RecordLocked(Change change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseChannelsLocked(const std::string& resource_key, const absl::Status& why,
                           bool final_bookmark) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable std::mutex mu_;
  std::map<std::string, ResourceState> resources_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::function<absl::Status(const Json&)>> validators_ ABSL_GUARDED_BY(mu_);
  int64_t resource_version_ ABSL_GUARDED_BY(mu_) = 0;
  // Changes up to this version are gone from history_.
  int64_t compacted_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Change> history_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<WatchChannel>> channels_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t, std::less<>> operations_ ABSL_GUARDED_BY(mu_);
  int64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_OBJECT_STORE_H_
