#include "operator/kube/informer.h"

#include "core/backoff.h"
#include "core/log.h"
#include "operator/kube/api_status.h"
#include "operator/kube/object_meta.h"

namespace psflow::kube {
namespace {

// metadata.managedFields: the API server's field-ownership bookkeeping, often the largest part of
// an object, never read here. A PUT without it leaves the stored one as it is.
void StripManagedFields(Json& object) {
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object()) {
    object["metadata"].erase("managedFields");
  }
}

const Json& LabelsOf(const Json& object) {
  static const Json* none = new Json();
  if (!object.is_object()) return *none;
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return *none;
  auto labels = meta->find("labels");
  return labels == meta->end() ? *none : *labels;
}

// The objects of `map` whose key starts with "<ns>/" (all of them when ns is empty), in order.
template <typename Map, typename Fn>
void ForEachInNamespace(const Map& map, const std::string& ns, Fn fn) {
  if (ns.empty()) {
    for (const auto& [key, obj] : map) fn(obj);
    return;
  }
  const std::string prefix = ns + "/";
  for (auto it = map.lower_bound(prefix);
       it != map.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    fn(it->second);
  }
}

}  // namespace

Informer::Informer(KubeClient& client, Resource resource, Options options, Handlers handlers)
    : client_(client),
      resource_(std::move(resource)),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      rng_(std::random_device{}()) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (thread_.joinable() || thread_.get_stop_source().stop_requested()) return;
  thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
}

void Informer::Stop() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return synced_cv_.wait_for(lock, timeout, [this] { return synced_; });
}

bool Informer::HasSynced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

Informer::Stats Informer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::shared_ptr<const Json> Informer::Get(const std::string& ns, const std::string& name) const {
  std::shared_lock<std::shared_mutex> lock(cache_mu_);
  auto it = objects_.find(Key(ns, name));
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const Json>> Informer::List(const std::string& ns,
                                                        const LabelSelector& selector) const {
  std::vector<std::shared_ptr<const Json>> out;
  std::shared_lock<std::shared_mutex> lock(cache_mu_);
  ForEachInNamespace(objects_, ns, [&](const std::shared_ptr<const Json>& obj) {
    if (selector.Matches(LabelsOf(*obj))) out.push_back(obj);
  });
  return out;
}

std::vector<std::shared_ptr<const Json>> Informer::ListByLabel(const std::string& ns,
                                                               const std::string& key,
                                                               const std::string& value) const {
  std::vector<std::shared_ptr<const Json>> out;
  std::shared_lock<std::shared_mutex> lock(cache_mu_);
  auto it = label_index_.find({key, value});
  if (it == label_index_.end()) return out;
  ForEachInNamespace(it->second, ns,
                     [&](const std::shared_ptr<const Json>& obj) { out.push_back(obj); });
  return out;
}

void Informer::IndexLocked(const std::string& key, const std::shared_ptr<const Json>& obj,
                           bool add) {
  const Json& labels = LabelsOf(*obj);
  if (!labels.is_object()) return;
  for (const auto& [label, value] : labels.items()) {
    if (!value.is_string()) continue;  // not a label Kubernetes would store; never matched
    std::pair<std::string, std::string> entry(label, value.get<std::string>());
    if (add) {
      label_index_[entry][key] = obj;
      continue;
    }
    auto it = label_index_.find(entry);
    if (it == label_index_.end()) continue;
    it->second.erase(key);
    if (it->second.empty()) label_index_.erase(it);
  }
}

std::shared_ptr<const Json> Informer::PutLocked(const std::string& key,
                                                std::shared_ptr<const Json> obj) {
  std::shared_ptr<const Json> old = EraseLocked(key);
  IndexLocked(key, obj, /*add=*/true);
  objects_.emplace(key, std::move(obj));
  return old;
}

std::shared_ptr<const Json> Informer::EraseLocked(const std::string& key) {
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  std::shared_ptr<const Json> old = std::move(it->second);
  objects_.erase(it);
  IndexLocked(key, old, /*add=*/false);
  return old;
}

void Informer::Pause(std::chrono::milliseconds delay, std::stop_token stop) {
  if (options_.sleep) {
    options_.sleep(delay, stop);
    return;
  }
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, stop, delay, [] { return false; });
}

int64_t Informer::WatchTimeoutSeconds() {
  const int64_t t = options_.watch_timeout_seconds;
  if (t <= 0) return 0;
  return std::uniform_int_distribution<int64_t>(t, 2 * t - 1)(rng_);
}

absl::Status Informer::ListAndReplace() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.lists;
  }
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  absl::StatusOr<ObjectList> list = client_.List(resource_, options_.ns, list_options);
  if (!list.ok()) return list.status();

  ObjectMap fresh;
  for (Json& item : list->items) {
    if (Name(item).empty()) {
      PSFLOW_LOG(WARNING) << resource_.plural << ": skipping a listed object without "
                          << "metadata.name: " << item.dump().substr(0, 200);
      continue;
    }
    std::string key = Key(item);
    StripManagedFields(item);
    fresh[std::move(key)] = std::make_shared<const Json>(std::move(item));
  }
  ObjectMap old;
  {
    std::unique_lock<std::shared_mutex> lock(cache_mu_);
    old = std::move(objects_);
    objects_.clear();
    label_index_.clear();
    for (const auto& [key, obj] : fresh) PutLocked(key, obj);
  }
  resource_version_ = list->resource_version;

  for (const auto& [key, obj] : fresh) {
    auto it = old.find(key);
    if (it == old.end()) {
      if (handlers_.on_add) handlers_.on_add(*obj);
    } else if (*it->second != *obj) {
      if (handlers_.on_update) handlers_.on_update(*it->second, *obj);
    }
  }
  for (const auto& [key, obj] : old) {
    if (fresh.count(key) == 0 && handlers_.on_delete) handlers_.on_delete(*obj);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    synced_ = true;
  }
  synced_cv_.notify_all();
  return absl::OkStatus();
}

void Informer::ApplyEvent(const WatchEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.events;
  }
  // Skipped objects move the version on too: the stream is in order either way.
  if (std::string version = ResourceVersion(event.object); !version.empty()) {
    resource_version_ = std::move(version);
  }
  if (event.type == WatchEventType::kBookmark) return;
  if (Name(event.object).empty()) {
    PSFLOW_LOG(WARNING) << resource_.plural << ": skipping a watch event for an object without "
                        << "metadata.name: " << event.object.dump().substr(0, 200);
    return;
  }
  const std::string key = Key(event.object);
  Json copy = event.object;
  StripManagedFields(copy);
  auto obj = std::make_shared<const Json>(std::move(copy));
  if (event.type == WatchEventType::kDeleted) {
    {
      std::unique_lock<std::shared_mutex> lock(cache_mu_);
      EraseLocked(key);
    }
    if (handlers_.on_delete) handlers_.on_delete(*obj);
    return;
  }
  std::shared_ptr<const Json> old;
  {
    std::unique_lock<std::shared_mutex> lock(cache_mu_);
    old = PutLocked(key, obj);
  }
  if (old == nullptr) {
    if (handlers_.on_add) handlers_.on_add(*obj);
  } else if (handlers_.on_update) {
    handlers_.on_update(*old, *obj);
  }
}

absl::Status Informer::WatchOnce(std::stop_token stop, bool* delivered) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.watches;
  }
  ListOptions watch_options;
  watch_options.label_selector = options_.label_selector;
  watch_options.resource_version = resource_version_;
  watch_options.timeout_seconds = WatchTimeoutSeconds();
  watch_options.allow_bookmarks = true;
  return client_.Watch(resource_, options_.ns, watch_options, stop, [&](const WatchEvent& event) {
    *delivered = true;
    ApplyEvent(event);
  });
}

void Informer::Run(std::stop_token stop) {
  Backoff backoff(options_.backoff_initial, options_.backoff_max,
                  Backoff::Clock::time_point::max());
  bool need_list = true;
  bool reported = false;  // the current streak of failures has been logged
  auto fail = [&](const char* what, const absl::Status& status) {
    if (!reported) {
      PSFLOW_LOG(WARNING) << resource_.plural << ": " << what << " failed, retrying with "
                          << "backoff: " << status;
    }
    reported = true;
    Pause(backoff.NextDelay().value_or(options_.backoff_max), stop);
  };
  while (!stop.stop_requested()) {
    bool just_listed = false;
    if (need_list) {
      absl::Status listed = ListAndReplace();
      if (!listed.ok()) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++stats_.list_errors;
        }
        fail("list", listed);
        continue;
      }
      need_list = false;
      just_listed = true;
      backoff.Reset();
      if (reported) PSFLOW_LOG(INFO) << resource_.plural << ": listed again";
      reported = false;
    }
    bool delivered = false;
    absl::Status watched = WatchOnce(stop, &delivered);
    if (stop.stop_requested()) return;
    if (watched.ok() || delivered) {
      backoff.Reset();
      reported = false;
    }
    if (watched.ok()) continue;  // the server's timeout: carry on from resource_version_
    if (IsGone(watched)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.relists_after_gone;
      }
      need_list = true;
      // Gone straight after a List, with nothing in between: the server is not keeping up;
      // do not hammer it with Lists.
      if (just_listed && !delivered) fail("watch after list", watched);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.watch_errors;
    }
    fail("watch", watched);
  }
}

}  // namespace psflow::kube
