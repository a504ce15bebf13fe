// A local, always-current copy of one resource's objects (client-go's reflector + indexer +
// shared informer, in one class): it lists the objects, then watches for changes, keeping a
// cache the controller reads instead of the API server, and tells handlers what changed.
//
// The loop, on a background thread:
//  - List (with the label selector) -> the cache becomes the list; handlers hear the difference
//    against the previous cache: on_add for new keys, on_update for changed objects, on_delete
//    for keys gone. So a relist after 410 Gone or an outage delivers the deletions that happened
//    meanwhile (on_delete then gets the last object the cache held).
//  - Watch from the list's resourceVersion (bookmarks on; timeout watch_timeout_seconds, drawn
//    from [t, 2t) so that informers do not all reconnect at once). Each ADDED / MODIFIED /
//    DELETED updates the cache, then calls on_add (key new) / on_update (key known) / on_delete
//    (with the event's object). A BOOKMARK only moves the resourceVersion on.
//  - The watch ends normally (server timeout) -> watch again from the last resourceVersion seen.
//    OUT_OF_RANGE (410 Gone) -> list again. Any other error (UNAVAILABLE, DATA_LOSS, ...) ->
//    logged once per streak of failures, back off, watch again from the last resourceVersion.
//    A failed List -> back off and list again, forever, until Stop. Backoff follows
//    core/backoff.h (initial doubling to max, jitter) and starts over after a success: a List
//    that succeeds, or a watch that delivered an event or ended normally.
//  - An object without metadata.name is skipped with a warning: a malformed object from the API
//    server never crashes the operator.
//  - Cached objects lack metadata.managedFields (the server's field-ownership bookkeeping, most of
//    a small object's bytes on a real API server; nothing here reads it, and a PUT without it
//    keeps the stored one), as client-go's TransformStripManagedFields does.
//
// Threads: handlers run on the informer thread, one at a time, after the cache is updated and
// without any lock held (they may call Get/List). Every other method may be called from any
// thread. Objects handed out are shared and immutable: copy one to change it.
#ifndef PSFLOW_OPERATOR_KUBE_INFORMER_H_
#define PSFLOW_OPERATOR_KUBE_INFORMER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/label_selector.h"
#include "operator/kube/resource.h"

namespace psflow::kube {

class Informer {
 public:
  struct Options {
    std::string ns;                       // "" = all namespaces (or a cluster-scoped resource)
    std::string label_selector;           // passed to the API server; "" = every object
    int64_t watch_timeout_seconds = 300;  // <= 0: the server's default
    std::chrono::milliseconds backoff_initial{200};
    std::chrono::milliseconds backoff_max{std::chrono::seconds(30)};
    // How the informer waits between retries; it must return early when `stop` is requested.
    // Empty: a real wait, woken by `stop`. Tests record the delays instead of waiting.
    std::function<void(std::chrono::milliseconds delay, std::stop_token stop)> sleep;
  };
  // Each may be empty.
  struct Handlers {
    std::function<void(const Json&)> on_add;
    std::function<void(const Json& old_obj, const Json& new_obj)> on_update;
    std::function<void(const Json&)> on_delete;
  };
  struct Stats {
    int64_t lists;               // List calls made
    int64_t watches;             // Watch calls made
    int64_t relists_after_gone;  // watches that ended in 410 Gone (each followed by a List)
    int64_t watch_errors;        // watches that failed otherwise (then retried after a backoff)
    int64_t events;              // watch events received, bookmarks and skipped ones included
    int64_t list_errors;         // List calls that failed (then retried after a backoff)
  };

  // `client` must outlive the informer. Nothing happens before Start.
  Informer(KubeClient& client, Resource resource, Options options, Handlers handlers);
  ~Informer();  // Stop()s
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Starts the background thread. At most once; later calls do nothing.
  void Start();
  // Requests the stop (a watch in progress is cancelled, a backoff wait cut short; a List in
  // progress is waited for), then joins the thread: no handler runs after Stop returns. The
  // cache keeps its last contents. Idempotent; not from a handler (the thread would join itself).
  void Stop();

  // True once the first List is in the cache and its on_add calls have returned. WaitForSync
  // blocks until then or for at most `timeout`.
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  bool HasSynced() const;

  // The cached object ns/name, or nullptr.
  std::shared_ptr<const Json> Get(const std::string& ns, const std::string& name) const;
  // Cached objects in `ns` ("" = all) matching `selector`, ordered by key ("ns/name").
  std::vector<std::shared_ptr<const Json>> List(const std::string& ns,
                                                const LabelSelector& selector) const;
  // Cached objects in `ns` ("" = all) whose label `key` is `value`, ordered by key; from an
  // index, in O(log n + matches).
  std::vector<std::shared_ptr<const Json>> ListByLabel(const std::string& ns,
                                                       const std::string& key,
                                                       const std::string& value) const;

  Stats stats() const;

 private:
  using ObjectMap = std::map<std::string, std::shared_ptr<const Json>>;  // by "ns/name"

  void Run(std::stop_token stop);
  // List and make the result the cache, calling handlers for the difference.
  absl::Status ListAndReplace();
  // One Watch from resource_version_. `delivered` is set when an event arrived.
  absl::Status WatchOnce(std::stop_token stop, bool* delivered);
  void ApplyEvent(const WatchEvent& event);
  void Pause(std::chrono::milliseconds delay, std::stop_token stop);
  int64_t WatchTimeoutSeconds();

  // The cache; each returns the object the key held before (nullptr if none). Caller holds
  // cache_mu_ exclusively.
  std::shared_ptr<const Json> PutLocked(const std::string& key, std::shared_ptr<const Json> obj);
  std::shared_ptr<const Json> EraseLocked(const std::string& key);
  void IndexLocked(const std::string& key, const std::shared_ptr<const Json>& obj, bool add);

  KubeClient& client_;
  const Resource resource_;
  const Options options_;
  const Handlers handlers_;

  mutable std::shared_mutex cache_mu_;
  ObjectMap objects_ ABSL_GUARDED_BY(cache_mu_);
  // (label key, label value) -> the objects carrying it.
  std::map<std::pair<std::string, std::string>, ObjectMap> label_index_ ABSL_GUARDED_BY(cache_mu_);

  mutable std::mutex mu_;
  mutable std::condition_variable synced_cv_;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_) = {};

  // Informer thread only.
  std::string resource_version_;
  std::minstd_rand rng_;

  std::mutex lifecycle_mu_;  // serialises Start and Stop
  std::jthread thread_ ABSL_GUARDED_BY(lifecycle_mu_);
};

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_INFORMER_H_
