// One open watch of the ObjectStore: the consumer's Watcher and the WatchChannel the store feeds.
#ifndef PSFLOW_TESTS_KUBE_WATCHER_H_
#define PSFLOW_TESTS_KUBE_WATCHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/label_selector.h"

namespace psflow::kubetest {

using Json = nlohmann::json;

// One committed write, as the store's history keeps it and replays it to watches. Like the API
// server's watch cache, it keeps the object before the change too, so that a label-selector
// watch can tell an object that starts or stops matching.
struct Change {
  kube::WatchEventType type;  // kAdded, kModified or kDeleted
  int64_t resource_version;   // of this write
  std::string resource_key;   // which resource (ObjectStore's key)
  std::string ns;
  Json object;    // after the write; null for kDeleted
  Json previous;  // before the write; null for kAdded
};

// The store's side of a watch. The producer methods are called by the store with its own lock
// held, so changes arrive in resourceVersion order; the consumer methods by the Watcher's owner.
// Thread-safe.
class WatchChannel {
 public:
  struct Params {
    std::string resource_key;
    std::string ns;  // empty: every namespace
    kube::LabelSelector selector;
    int64_t after_version = 0;  // changes at or below this version are not for this watch
    std::string kind;           // of the BOOKMARK objects
    std::string api_version;
    bool bookmarks = false;
    std::chrono::milliseconds bookmark_interval{1000};
    std::chrono::steady_clock::time_point deadline;  // the watch's timeout
    // A change that finds this many events undelivered ends the watch (a slow consumer); the
    // initial ADDED events alone may exceed it.
    size_t max_pending = 10000;
  };
  explicit WatchChannel(Params params);

  // Producer side.
  // Queues a synthetic ADDED for `object` (the initial state) if it matches.
  void OfferInitial(const Json& object, const std::string& ns);
  // Queues what `change` means for this watch, if anything: a change that makes an object start
  // matching the selector is ADDED, stop matching DELETED (with the object's last matching
  // state and the change's resourceVersion).
  void Offer(const Change& change);
  // Every change up to `version` has been offered: the resourceVersion a bookmark may carry.
  void MarkSeen(int64_t version);
  // Ends the watch once the queued events are delivered, with a final BOOKMARK when
  // `final_bookmark` and bookmarks were asked for. The first end wins.
  void Close(absl::Status why, bool final_bookmark);
  // The watch takes no more events (ended, past its deadline, or its Watcher gone).
  bool done() const;
  const std::string& resource_key() const { return params_.resource_key; }

  // Consumer side: see Watcher.
  std::optional<kube::WatchEvent> Next(std::chrono::milliseconds timeout);
  bool closed() const;
  absl::Status status() const;
  void Abandon();

 private:
  bool Matches(const Json& object, const std::string& ns) const;
  void PushLocked(kube::WatchEventType type, Json object) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked(absl::Status why, bool final_bookmark) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  kube::WatchEvent BookmarkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Params params_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<kube::WatchEvent> pending_ ABSL_GUARDED_BY(mu_);
  int64_t seen_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point next_bookmark_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // no more events are taken
  bool final_bookmark_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // everything delivered: Next returns nullopt
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
};

// An open watch, as ObjectStore::Watch returns it. Destroying it ends the watch. May outlive the
// store. Thread-safe, though one consumer is the intended use.
class Watcher {
 public:
  explicit Watcher(std::shared_ptr<WatchChannel> channel) : channel_(std::move(channel)) {}
  ~Watcher() { channel_->Abandon(); }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // The next event, in resourceVersion order, waiting up to `timeout` for one. nullopt when
  // the timeout passes first, or when the watch has ended and every event was delivered
  // (closed() is then true). BOOKMARK events (when asked for) come every bookmark_interval and
  // just before a timeout or CloseWatches() ends the watch; their resourceVersion says that
  // every change up to it has been delivered.
  std::optional<kube::WatchEvent> Next(std::chrono::milliseconds timeout) {
    return channel_->Next(timeout);
  }
  // The watch has ended and Next has nothing more to give.
  bool closed() const { return channel_->closed(); }
  // Why the watch ended, once closed(): OK when the server ended it (timeout_seconds,
  // CloseWatches(), the resource unregistered, or the consumer fell max_pending_events behind):
  // watch again from the last resourceVersion seen. OUT_OF_RANGE (410) when Compact() dropped
  // the history: list again. OK while the watch is open.
  absl::Status status() const { return channel_->status(); }

 private:
  std::shared_ptr<WatchChannel> channel_;
};

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_WATCHER_H_
