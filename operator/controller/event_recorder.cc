#include "operator/controller/event_recorder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "operator/controller/job_status.h"
#include "operator/kube/api_status.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {

EventRecorder::EventRecorder(kube::KubeClient& client, std::string component,
                             std::function<absl::Time()> now)
    : client_(client), component_(std::move(component)), now_(std::move(now)) {}

void EventRecorder::Record(const kube::Json& object, EventType type, const std::string& reason,
                           const std::string& message) {
  const std::string ns = kube::Namespace(object);
  const std::string stamp = FormatTimestamp(now_());
  kube::Json event = {{"apiVersion", "v1"},
                      {"kind", "Event"},
                      {"metadata", {{"generateName", kube::Name(object) + "."}, {"namespace", ns}}},
                      {"involvedObject",
                       {{"apiVersion", kube::TrainingJobs().ApiVersion()},
                        {"kind", kube::TrainingJobs().kind},
                        {"name", kube::Name(object)},
                        {"namespace", ns},
                        {"uid", kube::Uid(object)},
                        {"resourceVersion", kube::ResourceVersion(object)}}},
                      {"reason", reason},
                      {"message", message},
                      {"type", type == EventType::kNormal ? "Normal" : "Warning"},
                      {"source", {{"component", component_}}},
                      {"reportingComponent", component_},
                      {"firstTimestamp", stamp},
                      {"lastTimestamp", stamp},
                      {"count", 1}};
  const std::string key = absl::StrCat(kube::Uid(object), "\x1f", type == EventType::kNormal,
                                       "\x1f", reason, "\x1f", message);
  if (std::optional<Stored> earlier = Earlier(key)) {
    kube::Json repeat = event;
    repeat["metadata"] = {
        {"name", earlier->name}, {"namespace", ns}, {"resourceVersion", earlier->resource_version}};
    if (!earlier->first_timestamp.empty()) repeat["firstTimestamp"] = earlier->first_timestamp;
    repeat["count"] = earlier->count + 1;
    absl::StatusOr<kube::Json> updated = client_.Update(kube::Events(), ns, repeat);
    if (updated.ok()) {
      Remember(key, *updated);
      ++recorded_;
      return;
    }
    const absl::StatusCode code = updated.status().code();
    if (code == absl::StatusCode::kPermissionDenied) {
      // A Role without `update` on events (a chart older than this operator): new Events then.
      if (counting_.exchange(false)) {
        PSFLOW_LOG(WARNING) << "events cannot be updated (" << updated.status().message()
                            << "): each repeated event is a new Event from now on";
      }
    } else if (code != absl::StatusCode::kNotFound && !kube::IsConflict(updated.status())) {
      // The API server unreachable or failing: as client-go, the event is dropped (a create
      // would fail the same way, costing the pass another timeout).
      PSFLOW_LOG(WARNING) << "event " << reason << " for " << kube::Key(object)
                          << " not recorded: " << updated.status().message();
      return;
    }
    // Expired (the API server keeps events an hour), deleted or changed meanwhile: a new Event.
  }
  absl::StatusOr<kube::Json> created = client_.Create(kube::Events(), ns, event);
  if (!created.ok()) {
    PSFLOW_LOG(WARNING) << "event " << reason << " for " << kube::Key(object)
                        << " not recorded: " << created.status().message();
    return;
  }
  Remember(key, *created);
  ++recorded_;
}

std::optional<EventRecorder::Stored> EventRecorder::Earlier(const std::string& key) {
  if (!counting_.load()) return std::nullopt;
  std::lock_guard lock(mu_);
  auto it = remembered_.find(key);
  if (it == remembered_.end()) return std::nullopt;
  return it->second.first;
}

void EventRecorder::Remember(const std::string& key, const kube::Json& stored) {
  // Read defensively: a field the server left out or null is taken as a new Event's.
  Stored s{kube::Name(stored), kube::ResourceVersion(stored), "", 1};
  if (auto it = stored.find("firstTimestamp"); it != stored.end() && it->is_string()) {
    s.first_timestamp = it->get<std::string>();
  }
  if (auto it = stored.find("count"); it != stored.end() && it->is_number_integer()) {
    s.count = it->get<int64_t>();
  }
  std::lock_guard lock(mu_);
  if (auto it = remembered_.find(key); it != remembered_.end()) {
    order_.erase(it->second.second);
    remembered_.erase(it);
  }
  order_.push_front(key);
  remembered_.emplace(key, std::make_pair(std::move(s), order_.begin()));
  if (remembered_.size() > kRemembered) {
    remembered_.erase(order_.back());
    order_.pop_back();
  }
}

}  // namespace psflow::controller
