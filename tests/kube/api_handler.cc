#include "tests/kube/api_handler.h"

#include <chrono>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/api_status.h"
#include "operator/kube/label_selector.h"
#include "operator/kube/object_meta.h"
#include "tests/kube/discovery.h"
#include "tests/kube/object_rules.h"
#include "tests/kube/verbs.h"

namespace psflow::kubetest {
namespace {

using Json = nlohmann::json;

// How often a watch stream checks for its end (CloseWatches, Stop, a gone peer) between events.
constexpr std::chrono::milliseconds kWatchPoll{50};

const char* EventTypeName(kube::WatchEventType type) {
  switch (type) {
    case kube::WatchEventType::kAdded:
      return "ADDED";
    case kube::WatchEventType::kModified:
      return "MODIFIED";
    case kube::WatchEventType::kDeleted:
      return "DELETED";
    case kube::WatchEventType::kBookmark:
      return "BOOKMARK";
  }
  return "ERROR";
}

std::string Query(const HttpRequest& request, const std::string& key) {
  auto it = request.query.find(key);
  return it == request.query.end() ? std::string() : it->second;
}

// A boolean query parameter ("true", "1", "false", ...); nullopt when it is malformed.
std::optional<bool> QueryBool(const HttpRequest& request, const std::string& key) {
  const std::string text = Query(request, key);
  if (text.empty()) return false;
  bool value = false;
  if (!absl::SimpleAtob(text, &value)) return std::nullopt;
  return value;
}

// DeleteOptions from the body (JSON) and the query, as the API server reads them.
absl::StatusOr<kube::DeleteOptions> DeleteOptionsOf(const HttpRequest& request, const Json& body) {
  kube::DeleteOptions options;
  std::string policy = Query(request, "propagationPolicy");
  if (auto it = body.find("propagationPolicy"); it != body.end() && it->is_string()) {
    policy = it->get<std::string>();
  }
  if (policy.empty() && body.value("orphanDependents", false)) policy = "Orphan";
  if (policy == "Foreground") {
    options.propagation = kube::Propagation::kForeground;
  } else if (policy == "Orphan") {
    options.propagation = kube::Propagation::kOrphan;
  } else if (!policy.empty() && policy != "Background") {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"",
        policy, "\": supported values: \"Foreground\", \"Background\", \"Orphan\""));
  }
  if (auto it = body.find("preconditions"); it != body.end() && it->is_object()) {
    options.precondition_uid = it->value("uid", "");
  }
  if (auto it = body.find("gracePeriodSeconds"); it != body.end() && it->is_number_integer()) {
    options.grace_period_seconds = it->get<int64_t>();
  } else if (!Query(request, "gracePeriodSeconds").empty() &&
             !absl::SimpleAtoi(Query(request, "gracePeriodSeconds"),
                               &options.grace_period_seconds)) {
    return absl::InvalidArgumentError("gracePeriodSeconds must be an integer");
  }
  return options;
}

bool Send(HttpConnection& connection, int code, const Json& body, bool keep_alive) {
  return connection.WriteResponse(code, "application/json", body.dump(), keep_alive).ok() &&
         keep_alive;
}

bool SendStatus(HttpConnection& connection, const absl::Status& status, bool keep_alive) {
  return Send(connection, kube::HttpCodeFor(status), kube::StatusObjectFor(status), keep_alive);
}

bool SendBadRequest(HttpConnection& connection, absl::string_view message, bool keep_alive) {
  return Send(connection, 400, StatusBody(400, "BadRequest", message), keep_alive);
}

bool SendMethodNotAllowed(HttpConnection& connection, bool keep_alive) {
  return Send(connection, 405,
              StatusBody(405, "MethodNotAllowed",
                         "the server does not allow this method on the requested resource"),
              keep_alive);
}

}  // namespace

Json StatusBody(int code, absl::string_view reason, absl::string_view message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

ApiHandler::ApiHandler(ObjectStore* store, Options options)
    : store_(store), options_(std::move(options)) {}

bool ApiHandler::Handle(const HttpRequest& request, HttpConnection& connection,
                        absl::string_view server_address, const std::atomic<bool>& stopping) {
  const bool keep_alive = request.keep_alive;
  {
    std::lock_guard lock(mu_);
    ++requests_;
  }
  if (!options_.bearer_token.empty() &&
      request.Header("authorization") != "Bearer " + options_.bearer_token) {
    return SendStatus(connection, absl::UnauthenticatedError("Unauthorized"), keep_alive);
  }
  const ApiPath path = ParseApiPath(request.path);
  using Kind = ApiPath::Kind;
  switch (path.kind) {
    case Kind::kCollection:
    case Kind::kObject:
    case Kind::kStatus:
      return HandleResource(request, path, connection, stopping);
    case Kind::kUnknown:
      return SendStatus(connection, NotServedError(), keep_alive);
    default:
      break;
  }
  if (request.method != "GET") return SendMethodNotAllowed(connection, keep_alive);
  std::optional<Json> document;
  switch (path.kind) {
    case Kind::kVersion:
      document = VersionInfo();
      break;
    case Kind::kHealth:
      return connection.WriteResponse(200, "text/plain; charset=utf-8", "ok", keep_alive).ok() &&
             keep_alive;
    case Kind::kCoreVersions:
      document = CoreApiVersions(server_address);
      break;
    case Kind::kGroupList:
      document = ApiGroupList(store_->Resources());
      break;
    case Kind::kGroup:
      document = ApiGroup(store_->Resources(), path.group);
      break;
    case Kind::kResourceList:
      document = ApiResourceList(store_->Resources(), path.group, path.version);
      break;
    default:
      break;
  }
  if (!document.has_value()) return SendStatus(connection, NotServedError(), keep_alive);
  return Send(connection, 200, *document, keep_alive);
}

bool ApiHandler::HandleResource(const HttpRequest& request, const ApiPath& path,
                                HttpConnection& connection, const std::atomic<bool>& stopping) {
  using Kind = ApiPath::Kind;
  const bool keep_alive = request.keep_alive;
  const std::optional<ObjectStore::Registered> registered =
      store_->FindResource(path.group, path.version, path.plural);
  if (!registered.has_value()) return SendStatus(connection, NotServedError(), keep_alive);
  const kube::Resource& r = registered->resource;
  // A namespaced resource's objects live under namespaces/<ns>/; a cluster-scoped one has none.
  if ((r.namespaced && path.kind != Kind::kCollection && path.ns.empty()) ||
      (!r.namespaced && !path.ns.empty()) ||
      (path.kind == Kind::kStatus && !registered->has_status_subresource)) {
    return SendStatus(connection, NotServedError(), keep_alive);
  }

  absl::string_view verb;
  const std::string& method = request.method;
  if (path.kind == Kind::kCollection) {
    if (method == "GET") {
      const std::optional<bool> watch = QueryBool(request, "watch");
      if (!watch.has_value()) {
        return SendBadRequest(connection, "watch: not a boolean", keep_alive);
      }
      verb = *watch ? verb::kWatch : verb::kList;
    } else if (method == "POST" && (path.ns.size() > 0 || !r.namespaced)) {
      verb = verb::kCreate;
    }
  } else if (method == "GET") {
    verb = verb::kGet;
  } else if (method == "PUT") {
    verb = path.kind == Kind::kStatus ? verb::kUpdateStatus : verb::kUpdate;
  } else if (method == "DELETE" && path.kind == Kind::kObject) {
    verb = verb::kDelete;
  }
  if (verb.empty()) return SendMethodNotAllowed(connection, keep_alive);
  CountVerb(verb);
  if (IsForbidden(verb, r)) {
    const Reply forbidden = Forbidden(verb, r, path, path.name);
    return Send(connection, forbidden.code, forbidden.body, keep_alive);
  }
  if (!Query(request, "fieldSelector").empty()) {
    return SendBadRequest(connection, "fieldSelector is not supported by the test API server",
                          keep_alive);
  }
  const std::string ns = r.namespaced ? path.ns : "";
  if (verb == verb::kWatch) {
    return ServeWatch(request, *registered, ns, connection, stopping);
  }

  Json body;
  const bool has_body = verb == verb::kCreate || verb == verb::kUpdate ||
                        verb == verb::kUpdateStatus || verb == verb::kDelete;
  if (has_body) {
    if (request.body.empty() && verb == verb::kDelete) {
      body = Json::object();
    } else {
      body = Json::parse(request.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded() || !body.is_object()) {
        return SendBadRequest(connection, "the request body is not a JSON object", keep_alive);
      }
    }
  }
  std::string name = path.name;
  if (verb == verb::kCreate) name = kube::Name(body);
  if ((verb == verb::kUpdate || verb == verb::kUpdateStatus) && kube::Name(body) != path.name) {
    return SendBadRequest(connection,
                          absl::StrCat("the name of the object (", kube::Name(body),
                                       ") does not match the name on the URL (", path.name, ")"),
                          keep_alive);
  }

  absl::StatusOr<Json> result;
  int ok_code = 200;
  if (verb == verb::kGet) {
    result = store_->Get(r, ns, path.name);
  } else if (verb == verb::kList) {
    kube::ListOptions options;
    options.label_selector = Query(request, "labelSelector");
    if (absl::Status s = kube::LabelSelector::Parse(options.label_selector).status(); !s.ok()) {
      return SendBadRequest(connection, s.message(), keep_alive);
    }
    absl::StatusOr<kube::ObjectList> list = store_->List(r, ns, options);
    if (list.ok()) {
      result = Json{{"kind", r.kind + "List"},
                    {"apiVersion", r.ApiVersion()},
                    {"metadata", {{"resourceVersion", list->resource_version}}},
                    {"items", std::move(list->items)}};
    } else {
      result = list.status();
    }
  } else if (verb == verb::kCreate) {
    result = store_->Create(r, ns, body);
    ok_code = 201;
  } else if (verb == verb::kUpdate) {
    result = store_->Update(r, ns, body);
  } else if (verb == verb::kUpdateStatus) {
    result = store_->UpdateStatus(r, ns, body);
  } else {
    absl::StatusOr<kube::DeleteOptions> options = DeleteOptionsOf(request, body);
    result = options.ok() ? store_->Delete(r, ns, path.name, *options) : options.status();
  }
  if (!result.ok()) {
    Json error = kube::StatusObjectFor(result.status());
    if (!name.empty()) {
      error["details"] = {{"name", name}, {"kind", r.plural}};
      if (!r.group.empty()) error["details"]["group"] = r.group;
    }
    return Send(connection, kube::HttpCodeFor(result.status()), error, keep_alive);
  }
  return Send(connection, ok_code, *result, keep_alive);
}

bool ApiHandler::ServeWatch(const HttpRequest& request, const ObjectStore::Registered& registered,
                            const std::string& ns, HttpConnection& connection,
                            const std::atomic<bool>& stopping) {
  const bool keep_alive = request.keep_alive;
  kube::ListOptions options;
  options.label_selector = Query(request, "labelSelector");
  options.resource_version = Query(request, "resourceVersion");
  const std::optional<bool> bookmarks = QueryBool(request, "allowWatchBookmarks");
  const std::string timeout = Query(request, "timeoutSeconds");
  if (!bookmarks.has_value() ||
      (!timeout.empty() && !absl::SimpleAtoi(timeout, &options.timeout_seconds))) {
    return SendBadRequest(connection, "allowWatchBookmarks or timeoutSeconds malformed",
                          keep_alive);
  }
  options.allow_bookmarks = *bookmarks;
  if (absl::Status s = kube::LabelSelector::Parse(options.label_selector).status(); !s.ok()) {
    return SendBadRequest(connection, s.message(), keep_alive);
  }
  // Errors before the stream starts (410 for a too old version) are plain HTTP answers.
  absl::StatusOr<std::unique_ptr<Watcher>> watcher =
      store_->Watch(registered.resource, ns, options);
  if (!watcher.ok()) return SendStatus(connection, watcher.status(), keep_alive);
  if (!connection.StartChunked(200, "application/json").ok()) return false;
  const int64_t epoch = watch_epoch_.load();
  for (;;) {
    if (stopping.load() || watch_epoch_.load() != epoch) break;
    std::optional<kube::WatchEvent> event = (*watcher)->Next(kWatchPoll);
    if (event.has_value()) {
      const Json line{{"type", EventTypeName(event->type)}, {"object", std::move(event->object)}};
      if (!connection.WriteChunk(line.dump() + "\n").ok()) return false;
      continue;
    }
    if ((*watcher)->closed()) {
      // Ended by the store: a compaction is an ERROR event (410), anything else a clean end.
      const absl::Status why = (*watcher)->status();
      if (!why.ok()) {
        const Json line{{"type", "ERROR"}, {"object", kube::StatusObjectFor(why)}};
        if (!connection.WriteChunk(line.dump() + "\n").ok()) return false;
      }
      break;
    }
    if (connection.PeerClosed()) return false;
  }
  return connection.EndChunked().ok() && keep_alive && !stopping.load();
}

ApiHandler::Reply ApiHandler::Forbidden(absl::string_view verb, const kube::Resource& resource,
                                        const ApiPath& path, absl::string_view name) const {
  const bool status = verb == verb::kUpdateStatus || path.kind == ApiPath::Kind::kStatus;
  const absl::string_view rbac_verb = verb == verb::kUpdateStatus ? verb::kUpdate : verb;
  std::string subject = resource.QualifiedName();
  if (!name.empty()) absl::StrAppend(&subject, " \"", name, "\"");
  const std::string scope =
      path.ns.empty() ? "at the cluster scope" : absl::StrCat("in the namespace \"", path.ns, "\"");
  const std::string message = absl::StrCat(
      subject, " is forbidden: User \"", options_.user, "\" cannot ", rbac_verb, " resource \"",
      resource.plural, status ? "/status" : "", "\" in API group \"", resource.group, "\" ", scope);
  Json body = kube::StatusObjectFor(absl::PermissionDeniedError(message));
  body["details"] = {{"kind", resource.plural}};
  if (!name.empty()) body["details"]["name"] = name;
  if (!resource.group.empty()) body["details"]["group"] = resource.group;
  return {403, std::move(body)};
}

bool ApiHandler::IsForbidden(absl::string_view verb, const kube::Resource& resource) const {
  std::lock_guard lock(mu_);
  return forbidden_.contains({std::string(verb), resource.QualifiedName()});
}

void ApiHandler::CountVerb(absl::string_view verb) {
  std::lock_guard lock(mu_);
  auto it = verb_requests_.find(verb);
  if (it == verb_requests_.end()) it = verb_requests_.emplace(std::string(verb), 0).first;
  ++it->second;
}

void ApiHandler::CloseWatches() { watch_epoch_.fetch_add(1); }

void ApiHandler::Forbid(absl::string_view verb, const kube::Resource& resource) {
  std::lock_guard lock(mu_);
  forbidden_.insert({std::string(verb), resource.QualifiedName()});
}

void ApiHandler::AllowAll() {
  std::lock_guard lock(mu_);
  forbidden_.clear();
}

int64_t ApiHandler::RequestCount() const {
  std::lock_guard lock(mu_);
  return requests_;
}

int64_t ApiHandler::RequestCount(absl::string_view verb) const {
  std::lock_guard lock(mu_);
  auto it = verb_requests_.find(verb);
  return it == verb_requests_.end() ? 0 : it->second;
}

}  // namespace psflow::kubetest
