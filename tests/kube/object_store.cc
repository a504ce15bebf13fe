#include "tests/kube/object_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "operator/kube/label_selector.h"
#include "operator/kube/object_meta.h"
#include "tests/kube/object_rules.h"
#include "tests/kube/pod_status.h"
#include "tests/kube/verbs.h"

namespace psflow::kubetest {
namespace {

constexpr int kGenerateNameAttempts = 8;

std::string ResourceKey(absl::string_view group, absl::string_view version,
                        absl::string_view plural) {
  return absl::StrCat(group, "/", version, "/", plural);
}
std::string ResourceKey(const kube::Resource& r) {
  return ResourceKey(r.group, r.version, r.plural);
}

std::string ObjectKey(absl::string_view ns, absl::string_view name) {
  return absl::StrCat(ns, "/", name);
}

std::string MetaString(const Json& object, const char* field) {
  return kube::StringAt(object, "metadata", field);
}

void SetVersion(Json& object, int64_t version) {
  object["metadata"]["resourceVersion"] = std::to_string(version);
}

}  // namespace

ObjectStore::ObjectStore(Options options)
    : options_(std::move(options)),
      rng_(options_.seed != 0 ? options_.seed : std::random_device()()) {}

ObjectStore::~ObjectStore() {
  std::lock_guard lock(mu_);
  for (auto& channel : channels_) channel->Close(absl::OkStatus(), /*final_bookmark=*/false);
}

// ----- Resources -----

void ObjectStore::RegisterResource(const kube::Resource& resource, bool has_status_subresource) {
  std::lock_guard lock(mu_);
  ResourceState& state = resources_[ResourceKey(resource)];
  state.registered = {resource, has_status_subresource};
  state.name_rule = resource.group.empty() && resource.plural == "services" ? NameRule::kLabel
                                                                            : NameRule::kSubdomain;
}

void ObjectStore::RegisterBuiltins() {
  RegisterResource(kube::Pods(), true);
  RegisterResource(kube::Services(), true);
  RegisterResource(kube::Secrets(), false);
  RegisterResource(kube::ConfigMaps(), false);
  RegisterResource(kube::Events(), false);
  RegisterResource(kube::Leases(), false);
}

void ObjectStore::UnregisterResource(const kube::Resource& resource) {
  std::lock_guard lock(mu_);
  const std::string resource_key = ResourceKey(resource);
  auto it = resources_.find(resource_key);
  if (it == resources_.end()) return;
  ResourceState& state = it->second;
  std::vector<std::string> keys;
  for (const auto& [key, entry] : state.objects) keys.push_back(key);
  std::set<std::string> removing;
  for (const std::string& key : keys) {
    // Unlike the API server, finalizers do not hold the objects of a deleted CRD here: a test
    // tears the resource down at once. (Garbage collection may have taken a key already.)
    if (state.objects.contains(key)) {
      RemoveLocked(state, key, kube::Propagation::kBackground, removing);
    }
  }
  CloseChannelsLocked(resource_key, absl::OkStatus(), /*final_bookmark=*/false);
  resources_.erase(resource_key);
}

std::vector<ObjectStore::Registered> ObjectStore::Resources() const {
  std::lock_guard lock(mu_);
  std::vector<Registered> out;
  for (const auto& [key, state] : resources_) out.push_back(state.registered);
  return out;
}

std::optional<ObjectStore::Registered> ObjectStore::FindResource(absl::string_view group,
                                                                 absl::string_view version,
                                                                 absl::string_view plural) const {
  std::lock_guard lock(mu_);
  auto it = resources_.find(ResourceKey(group, version, plural));
  if (it == resources_.end()) return std::nullopt;
  return it->second.registered;
}

absl::StatusOr<ObjectStore::ResourceState*> ObjectStore::FindLocked(
    const kube::Resource& resource) {
  auto it = resources_.find(ResourceKey(resource));
  if (it == resources_.end()) return NotServedError();
  return &it->second;
}

void ObjectStore::Count(absl::string_view verb) {
  auto it = operations_.find(verb);
  if (it == operations_.end()) it = operations_.emplace(std::string(verb), 0).first;
  ++it->second;
}

absl::Status ObjectStore::ValidateLocked(const ResourceState& state, const Json& object) {
  auto it = validators_.find(ResourceKey(state.registered.resource));
  if (it == validators_.end()) return absl::OkStatus();
  return it->second(object);
}

// ----- Reads -----

absl::StatusOr<Json> ObjectStore::Get(const kube::Resource& resource, absl::string_view ns,
                                      absl::string_view name) {
  std::lock_guard lock(mu_);
  Count(verb::kGet);
  ASSIGN_OR_RETURN(ResourceState * state, FindLocked(resource));
  const kube::Resource& r = state->registered.resource;
  ASSIGN_OR_RETURN(const std::string object_ns, ObjectNamespace(r, ns));
  auto it = state->objects.find(ObjectKey(object_ns, name));
  if (it == state->objects.end()) return absl::NotFoundError(QuotedName(r, name) + " not found");
  return it->second.object;
}

absl::StatusOr<kube::ObjectList> ObjectStore::List(const kube::Resource& resource,
                                                   absl::string_view ns,
                                                   const kube::ListOptions& options) {
  std::lock_guard lock(mu_);
  Count(verb::kList);
  ASSIGN_OR_RETURN(ResourceState * state, FindLocked(resource));
  ASSIGN_OR_RETURN(const kube::LabelSelector selector,
                   kube::LabelSelector::Parse(options.label_selector));
  const bool one_namespace = state->registered.resource.namespaced && !ns.empty();
  kube::ObjectList list;
  for (const auto& [key, entry] : state->objects) {
    if (one_namespace && kube::Namespace(entry.object) != ns) continue;
    const Json& meta = entry.object["metadata"];
    if (!selector.Matches(meta.contains("labels") ? meta["labels"] : Json())) continue;
    list.items.push_back(entry.object);
  }
  list.resource_version = std::to_string(resource_version_);
  return list;
}

absl::StatusOr<std::unique_ptr<Watcher>> ObjectStore::Watch(const kube::Resource& resource,
                                                            absl::string_view ns,
                                                            const kube::ListOptions& options) {
  std::lock_guard lock(mu_);
  Count(verb::kWatch);
  ASSIGN_OR_RETURN(ResourceState * state, FindLocked(resource));
  const kube::Resource& r = state->registered.resource;
  ASSIGN_OR_RETURN(kube::LabelSelector selector,
                   kube::LabelSelector::Parse(options.label_selector));
  const bool from_now = options.resource_version.empty() || options.resource_version == "0";
  int64_t after = 0;
  if (!from_now && (!absl::SimpleAtoi(options.resource_version, &after) || after < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid resourceVersion \"", options.resource_version, "\""));
  }
  if (!from_now && after < compacted_version_) {
    return absl::OutOfRangeError(
        absl::StrCat("too old resource version: ", after, " (", compacted_version_, ")"));
  }
  const auto timeout = options.timeout_seconds > 0 ? std::chrono::seconds(options.timeout_seconds)
                                                   : options_.default_watch_timeout;
  auto channel = std::make_shared<WatchChannel>(
      WatchChannel::Params{.resource_key = ResourceKey(r),
                           .ns = r.namespaced ? std::string(ns) : std::string(),
                           .selector = std::move(selector),
                           .after_version = from_now ? resource_version_ : after,
                           .kind = r.kind,
                           .api_version = r.ApiVersion(),
                           .bookmarks = options.allow_bookmarks,
                           .bookmark_interval = options_.bookmark_interval,
                           .deadline = std::chrono::steady_clock::now() + timeout,
                           .max_pending = options_.max_pending_events});
  if (from_now) {
    for (const auto& [key, entry] : state->objects) {
      channel->OfferInitial(entry.object, kube::Namespace(entry.object));
    }
  } else {
    for (const Change& change : history_) channel->Offer(change);
  }
  channel->MarkSeen(resource_version_);
  std::erase_if(channels_, [](const auto& c) { return c->done(); });
  channels_.push_back(channel);
  return std::make_unique<Watcher>(std::move(channel));
}

// ----- Writes -----

int64_t ObjectStore::NewVersionLocked() {
  ++writes_;
  return ++resource_version_;
}

void ObjectStore::RecordLocked(Change change) {
  std::erase_if(channels_, [](const auto& c) { return c->done(); });
  for (const auto& channel : channels_) channel->Offer(change);
  history_.push_back(std::move(change));
  while (history_.size() > options_.history_window) {
    compacted_version_ = history_.front().resource_version;
    history_.pop_front();
  }
}

void ObjectStore::ReplaceLocked(const ResourceState& state, Entry& entry, Json next) {
  const int64_t version = NewVersionLocked();
  SetVersion(next, version);
  Json previous = std::exchange(entry.object, std::move(next));
  RecordLocked({kube::WatchEventType::kModified, version, ResourceKey(state.registered.resource),
                kube::Namespace(entry.object), entry.object, std::move(previous)});
}

absl::StatusOr<Json> ObjectStore::Create(const kube::Resource& resource, absl::string_view ns,
                                         const Json& object) {
  std::lock_guard lock(mu_);
  Count(verb::kCreate);
  ASSIGN_OR_RETURN(ResourceState * state, FindLocked(resource));
  const kube::Resource& r = state->registered.resource;
  ASSIGN_OR_RETURN(const std::string object_ns, ObjectNamespace(r, ns));
  Json stored = object;
  RETURN_IF_ERROR(NormalizeBody(r, object_ns, stored));
  Json& meta = stored["metadata"];
  if (!MetaString(stored, "resourceVersion").empty()) {
    return absl::InvalidArgumentError("resourceVersion should not be set on objects to be created");
  }
  std::string name = MetaString(stored, "name");
  const std::string generate = MetaString(stored, "generateName");
  for (int i = 0; name.empty() && !generate.empty() && i < kGenerateNameAttempts; ++i) {
    std::string candidate = GenerateName(generate, rng_);
    if (!state->objects.contains(ObjectKey(object_ns, candidate))) name = std::move(candidate);
  }
  RETURN_IF_ERROR(ValidateName(state->name_rule, r.kind, name));
  const std::string key = ObjectKey(object_ns, name);
  if (state->objects.contains(key)) {
    return absl::AlreadyExistsError(QuotedName(r, name) + " already exists");
  }
  meta["name"] = name;
  meta["uid"] = NewUid(rng_);
  meta["creationTimestamp"] = Rfc3339(options_.clock());
  meta["generation"] = 1;
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  if (state->registered.has_status_subresource) {
    // The status is the controllers' to write, through the status subresource.
    stored.erase("status");
    if (r.group.empty() && r.plural == "pods") {
      stored["status"] = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
    }
  }
  RETURN_IF_ERROR(ValidateLocked(*state, stored));
  const int64_t version = NewVersionLocked();
  SetVersion(stored, version);
  state->objects[key].object = stored;
  RecordLocked({kube::WatchEventType::kAdded, version, ResourceKey(r), object_ns, stored, Json()});
  return stored;
}

absl::StatusOr<Json> ObjectStore::Update(const kube::Resource& resource, absl::string_view ns,
                                         const Json& object) {
  std::lock_guard lock(mu_);
  Count(verb::kUpdate);
  ASSIGN_OR_RETURN(ResourceState * state, FindLocked(resource));
  return UpdateLocked(*state, ns, object, /*status_only=*/false);
}

absl::StatusOr<Json> ObjectStore::UpdateStatus(const kube::Resource& resource, absl::string_view ns,
                                               const Json& object) {
  std::lock_guard lock(mu_);
  Count(verb::kUpdateStatus);
  ASSIGN_OR_RETURN(ResourceState * state, FindLocked(resource));
  return UpdateLocked(*state, ns, object, /*status_only=*/true);
}

absl::StatusOr<Json> ObjectStore::UpdateLocked(ResourceState& state, absl::string_view ns,
                                               const Json& body, bool status_only) {
  const kube::Resource& r = state.registered.resource;
  const bool has_status = state.registered.has_status_subresource;
  if (status_only && !has_status) return NotServedError();
  ASSIGN_OR_RETURN(const std::string object_ns, ObjectNamespace(r, ns));
  Json next = body;
  RETURN_IF_ERROR(NormalizeBody(r, object_ns, next));
  const std::string name = MetaString(next, "name");
  if (name.empty()) {
    return absl::InvalidArgumentError("metadata.name: Required value: name is required");
  }
  const std::string key = ObjectKey(object_ns, name);
  auto it = state.objects.find(key);
  if (it == state.objects.end()) return absl::NotFoundError(QuotedName(r, name) + " not found");
  Entry& entry = it->second;
  const Json& stored = entry.object;
  const std::string version = MetaString(next, "resourceVersion");
  if (!version.empty() && version != kube::ResourceVersion(stored)) return ConflictError(r, name);
  const std::string uid = MetaString(next, "uid");
  if (!uid.empty() && uid != kube::Uid(stored)) return UidPreconditionError(uid, kube::Uid(stored));

  if (status_only) {
    Json with_status = stored;
    if (next.contains("status")) {
      with_status["status"] = next["status"];
    } else {
      with_status.erase("status");
    }
    next = std::move(with_status);
  } else {
    for (const char* field : {"namespace", "uid", "creationTimestamp", "deletionTimestamp",
                              "deletionGracePeriodSeconds", "generation", "resourceVersion"}) {
      KeepMetadataField(stored, next, field);
    }
    if (has_status) {
      if (stored.contains("status")) {
        next["status"] = stored["status"];
      } else {
        next.erase("status");
      }
    }
    if (kube::BeingDeleted(stored)) {
      const std::vector<std::string> before = Finalizers(stored);
      for (const std::string& f : Finalizers(next)) {
        if (std::find(before.begin(), before.end(), f) == before.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(QuotedName(r, name),
                           " is invalid: metadata.finalizers: Forbidden: no new finalizers can "
                           "be added if the object is being deleted, found new finalizers [\"",
                           f, "\"]"));
        }
      }
    }
    if (SpecChanged(stored, next)) next["metadata"]["generation"] = kube::Generation(stored) + 1;
  }
  if (next == stored) return stored;  // a no-op: no new version, no event
  RETURN_IF_ERROR(ValidateLocked(state, next));
  if (kube::BeingDeleted(next) && Finalizers(next).empty()) {
    // The last finalizer is gone: the deletion asked for earlier completes.
    std::set<std::string> removing;
    return RemoveLocked(state, key, entry.propagation, removing);
  }
  ReplaceLocked(state, entry, std::move(next));
  return entry.object;
}

absl::StatusOr<Json> ObjectStore::Delete(const kube::Resource& resource, absl::string_view ns,
                                         absl::string_view name,
                                         const kube::DeleteOptions& options) {
  std::lock_guard lock(mu_);
  Count(verb::kDelete);
  ASSIGN_OR_RETURN(ResourceState * state, FindLocked(resource));
  const kube::Resource& r = state->registered.resource;
  ASSIGN_OR_RETURN(const std::string object_ns, ObjectNamespace(r, ns));
  const std::string key = ObjectKey(object_ns, name);
  auto it = state->objects.find(key);
  if (it == state->objects.end()) return absl::NotFoundError(QuotedName(r, name) + " not found");
  const std::string uid = kube::Uid(it->second.object);
  if (!options.precondition_uid.empty() && options.precondition_uid != uid) {
    return UidPreconditionError(options.precondition_uid, uid);
  }
  std::set<std::string> removing;
  return DeleteLocked(*state, key, options.propagation, removing);
}

Json ObjectStore::DeleteLocked(ResourceState& state, const std::string& key,
                               kube::Propagation propagation, std::set<std::string>& removing) {
  Entry& entry = state.objects.at(key);
  if (Finalizers(entry.object).empty()) return RemoveLocked(state, key, propagation, removing);
  if (kube::BeingDeleted(entry.object)) return entry.object;  // already on its way
  // Finalizers hold the object: it is marked, and goes when an update empties them.
  Json next = entry.object;
  next["metadata"]["deletionTimestamp"] = Rfc3339(options_.clock());
  next["metadata"]["deletionGracePeriodSeconds"] = 0;
  entry.propagation = propagation;
  ReplaceLocked(state, entry, std::move(next));
  return entry.object;
}

Json ObjectStore::RemoveLocked(ResourceState& state, const std::string& key,
                               kube::Propagation propagation, std::set<std::string>& removing) {
  const std::string uid = kube::Uid(state.objects.at(key).object);
  removing.insert(uid);
  // Foreground: the dependents go first, then the owner.
  if (propagation == kube::Propagation::kForeground) {
    CollectDependentsLocked(uid, propagation, removing);
  }
  auto it = state.objects.find(key);
  Json last = std::move(it->second.object);
  state.objects.erase(it);
  const int64_t version = NewVersionLocked();
  RecordLocked({kube::WatchEventType::kDeleted, version, ResourceKey(state.registered.resource),
                kube::Namespace(last), Json(), last});
  if (propagation != kube::Propagation::kForeground) {
    CollectDependentsLocked(uid, propagation, removing);
  }
  SetVersion(last, version);
  return last;
}

bool ObjectStore::UidExistsLocked(const std::string& uid) const {
  for (const auto& [resource_key, state] : resources_) {
    for (const auto& [key, entry] : state.objects) {
      if (kube::Uid(entry.object) == uid) return true;
    }
  }
  return false;
}

void ObjectStore::CollectDependentsLocked(const std::string& owner_uid,
                                          kube::Propagation propagation,
                                          std::set<std::string>& removing) {
  std::vector<std::pair<ResourceState*, std::string>> dependents;
  for (auto& [resource_key, state] : resources_) {
    for (const auto& [key, entry] : state.objects) {
      const std::vector<std::string> uids = OwnerUids(entry.object);
      if (std::find(uids.begin(), uids.end(), owner_uid) != uids.end()) {
        dependents.emplace_back(&state, key);
      }
    }
  }
  for (auto& [state, key] : dependents) {
    auto it = state->objects.find(key);
    if (it == state->objects.end() || removing.contains(kube::Uid(it->second.object))) continue;
    bool other_owner = false;
    for (const std::string& uid : OwnerUids(it->second.object)) {
      if (uid != owner_uid && !removing.contains(uid) && UidExistsLocked(uid)) other_owner = true;
    }
    if (propagation != kube::Propagation::kOrphan && !other_owner) {
      DeleteLocked(*state, key, propagation, removing);
      continue;
    }
    // Orphaned, or kept alive by another owner: only the dangling reference goes.
    Json next = it->second.object;
    RemoveOwnerReference(next, owner_uid);
    ReplaceLocked(*state, it->second, std::move(next));
  }
}

// ----- Test controls -----

void ObjectStore::CloseChannelsLocked(const std::string& resource_key, const absl::Status& why,
                                      bool final_bookmark) {
  for (const auto& channel : channels_) {
    if (resource_key.empty() || channel->resource_key() == resource_key) {
      channel->Close(why, final_bookmark);
    }
  }
  std::erase_if(channels_, [](const auto& c) { return c->done(); });
}

void ObjectStore::Compact() {
  std::lock_guard lock(mu_);
  history_.clear();
  compacted_version_ = resource_version_;
  CloseChannelsLocked(
      "", absl::OutOfRangeError("The resourceVersion for the provided watch is too old."),
      /*final_bookmark=*/false);
}

void ObjectStore::CloseWatches() {
  std::lock_guard lock(mu_);
  CloseChannelsLocked("", absl::OkStatus(), /*final_bookmark=*/true);
}

void ObjectStore::SetValidator(const kube::Resource& resource,
                               std::function<absl::Status(const Json&)> validator) {
  std::lock_guard lock(mu_);
  if (validator) {
    validators_[ResourceKey(resource)] = std::move(validator);
  } else {
    validators_.erase(ResourceKey(resource));
  }
}

int64_t ObjectStore::WriteCount() const {
  std::lock_guard lock(mu_);
  return writes_;
}

int64_t ObjectStore::OperationCount(absl::string_view verb) const {
  std::lock_guard lock(mu_);
  auto it = operations_.find(verb);
  return it == operations_.end() ? 0 : it->second;
}

int64_t ObjectStore::CurrentResourceVersion() const {
  std::lock_guard lock(mu_);
  return resource_version_;
}

size_t ObjectStore::OpenWatchCount() const {
  std::lock_guard lock(mu_);
  return std::count_if(channels_.begin(), channels_.end(),
                       [](const auto& c) { return !c->done(); });
}

// ----- Kubelet stand-ins -----

absl::StatusOr<Json> ObjectStore::SetPodStatusLocked(
    absl::string_view ns, absl::string_view name,
    const std::function<absl::StatusOr<Json>(const Json&)>& make_status) {
  ASSIGN_OR_RETURN(ResourceState * state, FindLocked(kube::Pods()));
  auto it = state->objects.find(ObjectKey(ns, name));
  if (it == state->objects.end()) {
    return absl::NotFoundError(QuotedName(state->registered.resource, name) + " not found");
  }
  ASSIGN_OR_RETURN(Json status, make_status(it->second.object));
  // A kubelet reports only the pods bound to its node: one not bound yet is bound first, as a
  // scheduler would.
  Json& spec = it->second.object["spec"];
  if (spec.is_object() && spec.value("nodeName", "").empty()) spec["nodeName"] = kMemoryNodeName;
  Json body = it->second.object;
  body["status"] = std::move(status);
  return UpdateLocked(*state, ns, body, /*status_only=*/true);
}

absl::StatusOr<Json> ObjectStore::SetPodPhase(absl::string_view ns, absl::string_view name,
                                              absl::string_view phase, int exit_code,
                                              absl::string_view reason) {
  std::lock_guard lock(mu_);
  return SetPodStatusLocked(ns, name, [&](const Json& pod) {
    return PodStatusForPhase(pod, phase, exit_code, reason, options_.clock());
  });
}

absl::StatusOr<Json> ObjectStore::RestartContainer(absl::string_view ns, absl::string_view name,
                                                   int exit_code, absl::string_view reason,
                                                   absl::string_view container) {
  std::lock_guard lock(mu_);
  return SetPodStatusLocked(ns, name, [&](const Json& pod) {
    return PodStatusAfterRestart(pod, container, exit_code, reason, options_.clock());
  });
}

}  // namespace psflow::kubetest
