#include "operator/controller/job_status.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<ConditionType, const char*>, 9> kConditionNames = {{
    {ConditionType::kCreated, "Created"},
    {ConditionType::kRunning, "Running"},
    {ConditionType::kRestarting, "Restarting"},
    {ConditionType::kSucceeded, "Succeeded"},
    {ConditionType::kFailed, "Failed"},
    {ConditionType::kSuspended, "Suspended"},
    {ConditionType::kProgressLost, "ProgressLost"},
    {ConditionType::kUnschedulable, "Unschedulable"},
    {ConditionType::kQueued, "Queued"},
}};

constexpr int kMaxIndex = 100000;

constexpr std::array<api::ReplicaType, 4> kReplicaTypes = {
    api::ReplicaType::kChief, api::ReplicaType::kPS, api::ReplicaType::kWorker,
    api::ReplicaType::kEvaluator};

int64_t Int(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::optional<double> Number(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Calls f(index, entry) for each object of the array object[key] whose "index" is an integer in
// [0, kMaxIndex); skips the rest (a status written by hand or by another version).
template <typename F>
void ForEachIndexed(const json& object, const char* key, F f) {
  auto list = object.find(key);
  if (list == object.end() || !list->is_array()) return;
  for (const json& entry : *list) {
    if (!entry.is_object()) continue;
    auto index = entry.find("index");
    if (index == entry.end() || !index->is_number_integer()) continue;
    const int64_t i = index->get<int64_t>();
    if (i >= 0 && i < kMaxIndex) f(static_cast<int>(i), entry);
  }
}

}  // namespace

const char* ConditionTypeName(ConditionType type) {
  for (const auto& [t, name] : kConditionNames) {
    if (t == type) return name;
  }
  return "";
}

std::string FormatIndexes(const std::set<int>& indexes) {
  std::string out;
  for (auto it = indexes.begin(); it != indexes.end();) {
    int first = *it;
    int last = first;
    for (++it; it != indexes.end() && *it == last + 1; ++it) last = *it;
    if (!out.empty()) out += ',';
    absl::StrAppend(&out, first);
    if (last != first) absl::StrAppend(&out, "-", last);
  }
  return out;
}

std::set<int> ParseIndexes(const std::string& text) {
  std::set<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> range = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int first = 0;
    int last = 0;
    if (!absl::SimpleAtoi(range.first, &first) || first < 0) continue;
    if (range.second.empty()) {
      last = first;
    } else if (!absl::SimpleAtoi(range.second, &last) || last < first) {
      continue;
    }
    // Replica indexes are below 1000 (the parser's limit): anything above is not ours.
    if (last >= kMaxIndex) continue;
    for (int i = first; i <= last; ++i) out.insert(i);
  }
  return out;
}

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::Time ParseTimestamp(const std::string& text) {
  absl::Time t;
  std::string error;
  if (text.empty() || !absl::ParseTime(absl::RFC3339_full, text, &t, &error)) {
    return absl::InfinitePast();
  }
  return t;
}

JobStatus JobStatus::FromJson(const json& status) {
  JobStatus s;
  if (!status.is_object()) return s;
  if (auto it = status.find("conditions"); it != status.end() && it->is_array()) {
    for (const json& c : *it) {
      if (!c.is_object()) continue;
      const std::string type = kube::StringField(c, "type");
      for (const auto& [t, name] : kConditionNames) {
        if (type != name) continue;
        s.conditions.push_back({t, kube::StringField(c, "status") == "True",
                                kube::StringField(c, "reason"), kube::StringField(c, "message"),
                                kube::StringField(c, "lastUpdateTime"),
                                kube::StringField(c, "lastTransitionTime")});
      }
    }
  }
  if (auto it = status.find("replicaStatuses"); it != status.end() && it->is_object()) {
    for (api::ReplicaType type : kReplicaTypes) {
      auto r = it->find(std::string(api::ReplicaTypeName(type)));
      if (r == it->end() || !r->is_object()) continue;
      ReplicaStatus& rs = s.replica_statuses[type];
      rs.active = static_cast<int>(Int(*r, "active"));
      rs.ready = static_cast<int>(Int(*r, "ready"));
      rs.succeeded = static_cast<int>(Int(*r, "succeeded"));
      rs.failed = static_cast<int>(Int(*r, "failed"));
      rs.restarts = static_cast<int>(Int(*r, "restarts"));
      rs.completed_indexes = ParseIndexes(kube::StringField(*r, "completedIndexes"));
      ForEachIndexed(*r, "indexes", [&](int index, const json& entry) {
        IndexStatus& is = rs.indexes[index];
        is.restarts = static_cast<int>(Int(entry, "restarts"));
        is.replaced_restarts = static_cast<int>(Int(entry, "replacedPodRestarts"));
        is.replaced_pod_uid = kube::StringField(entry, "replacedPodUID");
        is.counted_pod_uid = kube::StringField(entry, "countedPodUID");
        if (auto f = entry.find("lastFailure"); f != entry.end() && f->is_object()) {
          ReplicaFailure failure{kube::StringField(*f, "reason"), std::nullopt,
                                 kube::StringField(*f, "message"), kube::StringField(*f, "pod"),
                                 kube::StringField(*f, "time")};
          if (auto code = f->find("exitCode"); code != f->end() && code->is_number_integer()) {
            failure.exit_code = code->get<int>();
          }
          is.last_failure = std::move(failure);
        }
      });
      ForEachIndexed(*r, "observedPods", [&](int index, const json& entry) {
        rs.observed_pods[index] = {
            kube::StringField(entry, "uid"),
            static_cast<int>(
                std::clamp<int64_t>(Int(entry, "restarts"), 0, std::numeric_limits<int>::max()))};
      });
    }
  }
  s.start_time = kube::StringField(status, "startTime");
  s.completion_time = kube::StringField(status, "completionTime");
  s.observed_generation = Int(status, "observedGeneration");
  s.restart_count = static_cast<int>(Int(status, "restartCount"));
  s.workers = kube::StringField(status, "workers");
  s.worker_selector = kube::StringField(status, "workerSelector");
  if (auto it = status.find("throughput"); it != status.end() && it->is_object()) {
    s.words_per_second = Number(*it, "wordsPerSecond");
    s.examples_per_second = Number(*it, "examplesPerSecond");
  }
  return s;
}

json JobStatus::ToJson() const {
  json out = json::object();
  const std::string state = State();
  if (!state.empty()) out["state"] = state;
  if (!conditions.empty()) {
    json list = json::array();
    for (const Condition& c : conditions) {
      list.push_back({{"type", ConditionTypeName(c.type)},
                      {"status", c.status ? "True" : "False"},
                      {"reason", c.reason},
                      {"message", c.message},
                      {"lastUpdateTime", c.last_update_time},
                      {"lastTransitionTime", c.last_transition_time}});
    }
    out["conditions"] = std::move(list);
  }
  if (!replica_statuses.empty()) {
    json replicas = json::object();
    for (const auto& [type, rs] : replica_statuses) {
      json r = {{"active", rs.active},
                {"ready", rs.ready},
                {"succeeded", rs.succeeded},
                {"failed", rs.failed},
                {"restarts", rs.restarts}};
      if (!rs.completed_indexes.empty()) {
        r["completedIndexes"] = FormatIndexes(rs.completed_indexes);
      }
      if (!rs.indexes.empty()) {
        json list = json::array();
        for (const auto& [index, is] : rs.indexes) {
          json entry = {{"index", index},
                        {"restarts", is.restarts},
                        {"replacedPodRestarts", is.replaced_restarts}};
          if (!is.replaced_pod_uid.empty()) entry["replacedPodUID"] = is.replaced_pod_uid;
          if (!is.counted_pod_uid.empty()) entry["countedPodUID"] = is.counted_pod_uid;
          if (is.last_failure) {
            const ReplicaFailure& f = *is.last_failure;
            json failure = {{"reason", f.reason}, {"pod", f.pod}, {"time", f.time}};
            if (f.exit_code) failure["exitCode"] = *f.exit_code;
            if (!f.message.empty()) failure["message"] = f.message;
            entry["lastFailure"] = std::move(failure);
          }
          list.push_back(std::move(entry));
        }
        r["indexes"] = std::move(list);
      }
      if (!rs.observed_pods.empty()) {
        json list = json::array();
        for (const auto& [index, pod] : rs.observed_pods) {
          list.push_back({{"index", index}, {"uid", pod.uid}, {"restarts", pod.restarts}});
        }
        r["observedPods"] = std::move(list);
      }
      replicas[std::string(api::ReplicaTypeName(type))] = std::move(r);
    }
    out["replicaStatuses"] = std::move(replicas);
  }
  if (!start_time.empty()) out["startTime"] = start_time;
  if (!completion_time.empty()) out["completionTime"] = completion_time;
  out["observedGeneration"] = observed_generation;
  out["restartCount"] = restart_count;
  if (!workers.empty()) out["workers"] = workers;
  if (!worker_selector.empty()) out["workerSelector"] = worker_selector;
  if (words_per_second || examples_per_second) {
    json t = json::object();
    // One decimal: the printer columns show the number as stored.
    if (words_per_second) t["wordsPerSecond"] = std::round(*words_per_second * 10) / 10;
    if (examples_per_second) t["examplesPerSecond"] = std::round(*examples_per_second * 10) / 10;
    out["throughput"] = std::move(t);
  }
  return out;
}

int ReplicaStatus::ReplacedRestarts() const {
  // In 64 bits (at most kMaxIndex ints cannot overflow them), then saturated: the counts come
  // from a status anyone allowed to write it may have edited.
  int64_t sum = 0;
  for (const auto& [index, is] : indexes) sum += is.replaced_restarts;
  return static_cast<int>(
      std::clamp<int64_t>(sum, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}

const Condition* JobStatus::Find(ConditionType type) const {
  for (const Condition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

bool JobStatus::Is(ConditionType type) const {
  const Condition* c = Find(type);
  return c != nullptr && c->status;
}

std::string JobStatus::State() const {
  for (ConditionType type :
       {ConditionType::kFailed, ConditionType::kSucceeded, ConditionType::kSuspended,
        ConditionType::kQueued, ConditionType::kRestarting, ConditionType::kRunning,
        ConditionType::kCreated}) {
    if (Is(type)) return ConditionTypeName(type);
  }
  return "";
}

void JobStatus::SetCondition(ConditionType type, bool status, const std::string& reason,
                             const std::string& message, absl::Time now) {
  const std::string stamp = FormatTimestamp(now);
  auto set_one = [&](ConditionType t, bool s, const std::string& r, const std::string& m) {
    for (Condition& c : conditions) {
      if (c.type != t) continue;
      if (c.status == s && c.reason == r && c.message == m) return;
      if (c.status != s) c.last_transition_time = stamp;
      c.status = s;
      c.reason = r;
      c.message = m;
      c.last_update_time = stamp;
      return;
    }
    if (s) conditions.push_back({t, s, r, m, stamp, stamp});
  };
  auto clear = [&](ConditionType t, const std::string& r, const std::string& m) {
    if (Is(t)) set_one(t, false, r, m);
  };
  set_one(type, status, reason, message);
  if (!status) return;
  switch (type) {
    case ConditionType::kRunning:
      clear(ConditionType::kRestarting, reason, message);
      break;
    case ConditionType::kRestarting:
      clear(ConditionType::kRunning, reason, message);
      break;
    case ConditionType::kSucceeded:
    case ConditionType::kFailed:
    case ConditionType::kSuspended:
      clear(ConditionType::kQueued, reason, message);
      [[fallthrough]];
    case ConditionType::kQueued:
      clear(ConditionType::kRunning, reason, message);
      clear(ConditionType::kRestarting, reason, message);
      break;
    case ConditionType::kCreated:
    case ConditionType::kProgressLost:
    case ConditionType::kUnschedulable:
      break;
  }
}

}  // namespace psflow::controller
