#include "tests/kube/watcher.h"

#include <algorithm>
#include <utility>

namespace psflow::kubetest {
namespace {

using Clock = std::chrono::steady_clock;

const Json& Labels(const Json& object) {
  static const Json* none = new Json();
  if (!object.is_object()) return *none;
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return *none;
  auto labels = meta->find("labels");
  return labels == meta->end() ? *none : *labels;
}

}  // namespace

WatchChannel::WatchChannel(Params params)
    : params_(std::move(params)), next_bookmark_(Clock::now() + params_.bookmark_interval) {}

bool WatchChannel::Matches(const Json& object, const std::string& ns) const {
  if (!params_.ns.empty() && ns != params_.ns) return false;
  return params_.selector.Matches(Labels(object));
}

void WatchChannel::OfferInitial(const Json& object, const std::string& ns) {
  if (!Matches(object, ns)) return;
  std::lock_guard lock(mu_);
  // The initial state is not held against max_pending: the API server sends it apart from the
  // buffered changes too.
  if (!closing_) pending_.push_back({kube::WatchEventType::kAdded, object});
}

void WatchChannel::Offer(const Change& change) {
  std::lock_guard lock(mu_);
  if (closing_) return;
  seen_version_ = std::max(seen_version_, change.resource_version);
  if (change.resource_version <= params_.after_version ||
      change.resource_key != params_.resource_key) {
    return;
  }
  // As the API server's cacheWatcher converts a change for one watcher.
  const bool now_matches =
      change.type != kube::WatchEventType::kDeleted && Matches(change.object, change.ns);
  const bool matched = !change.previous.is_null() && Matches(change.previous, change.ns);
  if (now_matches && !matched) {
    PushLocked(kube::WatchEventType::kAdded, change.object);
  } else if (now_matches && matched) {
    PushLocked(kube::WatchEventType::kModified, change.object);
  } else if (matched) {
    // Deleted, or no longer selected: the last state this watch saw, at the change's version.
    Json last = change.previous;
    last["metadata"]["resourceVersion"] = std::to_string(change.resource_version);
    PushLocked(kube::WatchEventType::kDeleted, std::move(last));
  }
}

void WatchChannel::MarkSeen(int64_t version) {
  std::lock_guard lock(mu_);
  if (!closing_) seen_version_ = std::max(seen_version_, version);
}

void WatchChannel::PushLocked(kube::WatchEventType type, Json object) {
  if (pending_.size() >= params_.max_pending) {
    // A consumer this far behind is cut off, as the API server does with an unresponsive
    // watcher: what was queued is dropped and no bookmark may claim it was delivered. The
    // client watches again from the last version it saw.
    pending_.clear();
    CloseLocked(absl::OkStatus(), /*final_bookmark=*/false);
    return;
  }
  pending_.push_back({type, std::move(object)});
  wake_.notify_one();
}

void WatchChannel::Close(absl::Status why, bool final_bookmark) {
  std::lock_guard lock(mu_);
  CloseLocked(std::move(why), final_bookmark);
}

void WatchChannel::CloseLocked(absl::Status why, bool final_bookmark) {
  if (closing_) return;
  closing_ = true;
  final_bookmark_ = final_bookmark && params_.bookmarks;
  why_ = absl::Status(why.code(), why.message());  // not shared with other channels
  wake_.notify_all();
}

bool WatchChannel::done() const {
  std::lock_guard lock(mu_);
  return closing_ || abandoned_;
}

void WatchChannel::Abandon() {
  std::lock_guard lock(mu_);
  abandoned_ = true;
  CloseLocked(absl::OkStatus(), false);
}

kube::WatchEvent WatchChannel::BookmarkLocked() const {
  return {kube::WatchEventType::kBookmark,
          Json{{"kind", params_.kind},
               {"apiVersion", params_.api_version},
               {"metadata", {{"resourceVersion", std::to_string(seen_version_)}}}}};
}

std::optional<kube::WatchEvent> WatchChannel::Next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const Clock::time_point give_up = Clock::now() + timeout;
  for (;;) {
    if (!pending_.empty()) {
      kube::WatchEvent event = std::move(pending_.front());
      pending_.pop_front();
      return event;
    }
    if (closed_) return std::nullopt;
    const Clock::time_point now = Clock::now();
    if (!closing_ && now >= params_.deadline) CloseLocked(absl::OkStatus(), true);
    if (closing_) {
      // Everything queued was delivered, so the bookmark's version is honest.
      closed_ = true;
      if (final_bookmark_) return BookmarkLocked();
      return std::nullopt;
    }
    if (params_.bookmarks && now >= next_bookmark_) {
      next_bookmark_ = now + params_.bookmark_interval;
      return BookmarkLocked();
    }
    if (now >= give_up) return std::nullopt;
    Clock::time_point wake_at = std::min(give_up, params_.deadline);
    if (params_.bookmarks) wake_at = std::min(wake_at, next_bookmark_);
    wake_.wait_until(lock, wake_at);
  }
}

bool WatchChannel::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

absl::Status WatchChannel::status() const {
  std::lock_guard lock(mu_);
  // A copy with a rep of its own: the statuses' shared reps are reference-counted inside the
  // (uninstrumented) absl library, which ThreadSanitizer cannot see.
  return closed_ ? absl::Status(why_.code(), why_.message()) : absl::OkStatus();
}

}  // namespace psflow::kubetest
