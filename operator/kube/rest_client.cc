#include "operator/kube/rest_client.h"

#include <cpprest/http_client.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "operator/kube/api_status.h"
#include "operator/kube/bearer_token.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/rate_limiter.h"
#include "operator/kube/tls_config.h"
#include "operator/kube/watch_decoder.h"

#ifndef PSFLOW_VERSION
#error "PSFLOW_VERSION must be defined by the build"
#endif

namespace psflow::kube {
namespace {

namespace http = web::http;
using http::client::http_client;
using http::client::http_client_config;
using Clock = std::chrono::steady_clock;

// When a watch has no timeoutSeconds the API server picks one of at most an hour.
constexpr std::chrono::seconds kLongestServerWatch{3600};

struct Answer {
  int code = 0;
  std::string body;
};

// "?a=1&b=x%3Dy": values percent-encoded; pairs with an empty value left out.
std::string QueryString(const std::vector<std::pair<const char*, std::string>>& params) {
  std::string query;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    absl::StrAppend(&query, query.empty() ? "?" : "&", key, "=",
                    web::uri::encode_data_string(value));
  }
  return query;
}

// apiVersion and kind, which the API server leaves out of list items.
void FillTypeMeta(const Resource& resource, Json& object) {
  if (!object.is_object()) return;
  if (!object.contains("apiVersion")) object["apiVersion"] = resource.ApiVersion();
  if (!object.contains("kind")) object["kind"] = resource.kind;
}

std::string Dump(const Json& json) {
  // Replacing invalid UTF-8 rather than throwing: no exception leaves the client.
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<Json> ParseObject(const Answer& answer, absl::string_view what) {
  Json parsed = Json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    return absl::DataLossError(
        absl::StrCat(what, ": the answer is not a JSON object: ", answer.body.substr(0, 200)));
  }
  return parsed;
}

const char* PropagationName(Propagation propagation) {
  switch (propagation) {
    case Propagation::kForeground:
      return "Foreground";
    case Propagation::kOrphan:
      return "Orphan";
    case Propagation::kBackground:
      break;
  }
  return "Background";
}

absl::Status NotInstalled(const Resource& resource, absl::string_view server) {
  if (resource.group.empty()) {
    return absl::NotFoundError(absl::StrCat("resource ", resource.plural, " is not served by ",
                                            server, " (", resource.ApiVersion(), ")"));
  }
  return absl::NotFoundError(absl::StrCat("CRD ", resource.QualifiedName(),
                                          " is not installed: ", server, " does not serve ",
                                          resource.ApiVersion(), " ", resource.plural));
}

}  // namespace

std::string DefaultUserAgent() { return absl::StrCat("psflow-operator/", PSFLOW_VERSION); }

class RestKubeClient::Impl {
 public:
  Impl(ClusterConfig config, Options options, SslContextSetup ssl)
      : config_(std::move(config)),
        options_(std::move(options)),
        ssl_(std::move(ssl)),
        limiter_(options_.qps, options_.burst),
        token_(config_.token, config_.token_file),
        client_(web::uri(config_.server), ClientConfig(options_.request_timeout)) {}

  const std::string& server() const { return config_.server; }

  // One request with a whole answer. `what` ("GET /api/v1/...") starts error messages.
  absl::StatusOr<Answer> Send(absl::string_view verb, const Resource& resource,
                              const http::method& method, const std::string& target,
                              const Json* body) {
    const std::string what = absl::StrCat(method, " ", target);
    limiter_.Wait();
    ASSIGN_OR_RETURN(http::http_request request, MakeRequest(method, target, body, what));
    const Clock::time_point start = Clock::now();
    int code = 0;
    absl::StatusOr<Answer> answer = [&]() -> absl::StatusOr<Answer> {
      try {
        http::http_response response = client_.request(request).get();
        code = response.status_code();
        const std::vector<unsigned char> bytes = response.extract_vector().get();
        return Answer{code, std::string(bytes.begin(), bytes.end())};
      } catch (const http::http_exception& e) {
        return TransportError(what, e, options_.request_timeout);
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat(what, ": ", e.what()));
      }
    }();
    Observe(verb, resource, code, start);
    return answer;
  }

  // Send, then the answer's object; the API error for a non-2xx answer.
  absl::StatusOr<Json> SendForObject(absl::string_view verb, const Resource& resource,
                                     const http::method& method, const std::string& target,
                                     const Json* body) {
    ASSIGN_OR_RETURN(const Answer answer, Send(verb, resource, method, target, body));
    const std::string what = absl::StrCat(method, " ", target);
    RETURN_IF_ERROR(StatusFromHttp(answer.code, answer.body, what));
    ASSIGN_OR_RETURN(Json object, ParseObject(answer, what));
    FillTypeMeta(resource, object);
    return object;
  }

  absl::Status Watch(const Resource& resource, absl::string_view ns, const ListOptions& options,
                     std::stop_token stop, const std::function<void(const WatchEvent&)>& on_event) {
    const std::string target = absl::StrCat(
        resource.CollectionPath(ns),
        QueryString({{"watch", "true"},
                     {"labelSelector", options.label_selector},
                     {"resourceVersion", options.resource_version},
                     {"timeoutSeconds",
                      options.timeout_seconds > 0 ? absl::StrCat(options.timeout_seconds) : ""},
                     {"allowWatchBookmarks", options.allow_bookmarks ? "true" : ""}}));
    const std::string what = absl::StrCat("watch ", target);
    const auto cancelled = [&] { return absl::CancelledError(absl::StrCat(what, ": stopped")); };
    if (!limiter_.Wait(stop)) return cancelled();
    ASSIGN_OR_RETURN(http::http_request request,
                     MakeRequest(http::methods::GET, target, nullptr, what));

    // The inactivity timeout must outlast the server's own end of the watch.
    const std::chrono::milliseconds timeout =
        options_.request_timeout + (options.timeout_seconds > 0
                                        ? std::chrono::seconds(options.timeout_seconds)
                                        : kLongestServerWatch);
    pplx::cancellation_token_source cancel;
    // Cancelling closes the socket, failing any read in progress.
    std::stop_callback on_stop(stop, [&cancel] { cancel.cancel(); });
    // However the watch ends, its connection is closed rather than left streaming.
    absl::Cleanup close_connection = [&cancel] { cancel.cancel(); };

    const Clock::time_point start = Clock::now();
    int code = 0;
    absl::Status status = [&]() -> absl::Status {
      try {
        // A client of its own: its timeout differs, and its connection is never reused.
        http_client client(web::uri(config_.server), ClientConfig(timeout));
        http::http_response response = client.request(request, cancel.get_token()).get();
        code = response.status_code();
        if (code < 200 || code >= 300) {
          const std::vector<unsigned char> bytes = response.extract_vector().get();
          return StatusFromHttp(code, std::string(bytes.begin(), bytes.end()), what);
        }
        return ReadEvents(resource, response, stop, on_event, what);
      } catch (const http::http_exception& e) {
        if (stop.stop_requested()) return cancelled();
        return TransportError(what, e, timeout);
      } catch (const pplx::task_canceled&) {
        return cancelled();
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat(what, ": ", e.what()));
      }
    }();
    Observe("watch", resource, code, start);
    return status;
  }

 private:
  http_client_config ClientConfig(std::chrono::milliseconds timeout) const {
    http_client_config config;
    config.set_timeout(timeout);
    config.set_validate_certificates(!config_.insecure_skip_tls_verify);
    config.set_ssl_context_callback(ssl_);
    return config;
  }

  absl::StatusOr<http::http_request> MakeRequest(const http::method& method,
                                                 const std::string& target, const Json* body,
                                                 absl::string_view what) {
    ASSIGN_OR_RETURN(const std::string token, token_.Get());
    try {
      http::http_request request(method);
      request.set_request_uri(web::uri(target));
      request.headers().add(http::header_names::accept, "application/json");
      request.headers().add(http::header_names::user_agent, options_.user_agent);
      if (!token.empty()) {
        request.headers().add(http::header_names::authorization, "Bearer " + token);
      }
      if (body != nullptr) {
        // A byte vector, not a std::string: cpprestsdk reads a string body through a
        // streambuf<char> cast to streambuf<uint8_t>, which UBSan rightly reports.
        request.headers().set_content_type("application/json");
        const std::string text = Dump(*body);
        request.set_body(std::vector<unsigned char>(text.begin(), text.end()));
      }
      return request;
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", e.what()));
    }
  }

  // Reads a 2xx watch answer line by line as it arrives, delivering each event.
  absl::Status ReadEvents(const Resource& resource, http::http_response& response,
                          const std::stop_token& stop,
                          const std::function<void(const WatchEvent&)>& on_event,
                          absl::string_view what) {
    using Buffer = concurrency::streams::streambuf<uint8_t>;
    Buffer body = response.body().streambuf();
    WatchLineBuffer lines;
    std::vector<uint8_t> chunk(64 << 10);
    const auto deliver = [&](absl::string_view line) -> absl::Status {
      if (absl::StripAsciiWhitespace(line).empty()) return absl::OkStatus();
      ASSIGN_OR_RETURN(WatchEvent event, ParseWatchEvent(line, what));
      FillTypeMeta(resource, event.object);
      on_event(event);
      return absl::OkStatus();
    };
    while (true) {
      // bumpc waits for one byte (or the end); whatever else has arrived comes with it.
      const Buffer::int_type first = body.bumpc().get();
      if (first == Buffer::traits::eof()) break;
      chunk[0] = static_cast<uint8_t>(first);
      size_t size = 1;
      const size_t available = std::min(body.in_avail(), chunk.size() - 1);
      if (available > 0) size += body.getn(chunk.data() + 1, available).get();
      RETURN_IF_ERROR(
          lines.Append(absl::string_view(reinterpret_cast<const char*>(chunk.data()), size)));
      while (std::optional<std::string> line = lines.NextLine()) {
        RETURN_IF_ERROR(deliver(*line));
        if (stop.stop_requested()) return absl::CancelledError(absl::StrCat(what, ": stopped"));
      }
    }
    // The server ended the watch (its timeout, or it chose to).
    return deliver(lines.Remainder());
  }

  // A request that got no (whole) answer: cpprestsdk reports its inactivity timeout as
  // timed_out, everything else (refused, reset, TLS handshake) with other codes.
  absl::Status TransportError(absl::string_view what, const http::http_exception& e,
                              std::chrono::milliseconds timeout) const {
    if (e.error_code() == std::make_error_code(std::errc::timed_out)) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": ", config_.server, " sent nothing for ", timeout.count(), " ms"));
    }
    return absl::UnavailableError(
        absl::StrCat(what, ": request to ", config_.server, " failed: ", e.what()));
  }

  void Observe(absl::string_view verb, const Resource& resource, int code,
               Clock::time_point start) const {
    if (!options_.observer) return;
    options_.observer(verb, resource, code,
                      std::chrono::duration<double>(Clock::now() - start).count());
  }

  const ClusterConfig config_;
  const Options options_;
  const SslContextSetup ssl_;
  RateLimiter limiter_;
  BearerToken token_;
  http_client client_;  // thread-safe; pools connections
};

absl::StatusOr<std::unique_ptr<RestKubeClient>> RestKubeClient::Create(const ClusterConfig& config,
                                                                       Options options) {
  ASSIGN_OR_RETURN(SslContextSetup ssl, MakeSslContextSetup(config));
  try {
    auto impl = std::make_unique<Impl>(config, std::move(options), std::move(ssl));
    return std::unique_ptr<RestKubeClient>(new RestKubeClient(std::move(impl)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.source, ": server \"", config.server, "\": ", e.what()));
  }
}

RestKubeClient::RestKubeClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RestKubeClient::~RestKubeClient() = default;

const std::string& RestKubeClient::server() const { return impl_->server(); }

absl::StatusOr<Json> RestKubeClient::Get(const Resource& resource, absl::string_view ns,
                                         absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("get " + resource.plural + ": no name");
  return impl_->SendForObject("get", resource, http::methods::GET, resource.ObjectPath(ns, name),
                              nullptr);
}

absl::StatusOr<ObjectList> RestKubeClient::List(const Resource& resource, absl::string_view ns,
                                                const ListOptions& options) {
  const std::string target = absl::StrCat(
      resource.CollectionPath(ns), QueryString({{"labelSelector", options.label_selector},
                                                {"resourceVersion", options.resource_version}}));
  ASSIGN_OR_RETURN(Json list,
                   impl_->SendForObject("list", resource, http::methods::GET, target, nullptr));
  ObjectList result;
  result.resource_version = ResourceVersion(list);
  if (auto items = list.find("items"); items != list.end() && items->is_array()) {
    result.items.reserve(items->size());
    for (Json& item : *items) {
      FillTypeMeta(resource, item);
      result.items.push_back(std::move(item));
    }
  }
  return result;
}

absl::Status RestKubeClient::Watch(const Resource& resource, absl::string_view ns,
                                   const ListOptions& options, std::stop_token stop,
                                   const std::function<void(const WatchEvent&)>& on_event) {
  return impl_->Watch(resource, ns, options, std::move(stop), on_event);
}

namespace {

// The namespace a write goes to: `ns`, else the object's own.
absl::StatusOr<std::string> WriteNamespace(const Resource& resource, absl::string_view ns,
                                           const Json& object, absl::string_view verb) {
  if (!resource.namespaced) return std::string();
  std::string result = ns.empty() ? Namespace(object) : std::string(ns);
  if (result.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(verb, " ", resource.plural, ": no namespace given or in metadata"));
  }
  return result;
}

absl::StatusOr<std::string> ObjectName(const Resource& resource, const Json& object,
                                       absl::string_view verb) {
  std::string name = Name(object);
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(verb, " ", resource.plural, ": the object has no metadata.name"));
  }
  return name;
}

}  // namespace

absl::StatusOr<Json> RestKubeClient::Create(const Resource& resource, absl::string_view ns,
                                            const Json& object) {
  ASSIGN_OR_RETURN(const std::string target_ns, WriteNamespace(resource, ns, object, "create"));
  Json body = object;
  FillTypeMeta(resource, body);
  return impl_->SendForObject("create", resource, http::methods::POST,
                              resource.CollectionPath(target_ns), &body);
}

absl::StatusOr<Json> RestKubeClient::Update(const Resource& resource, absl::string_view ns,
                                            const Json& object) {
  ASSIGN_OR_RETURN(const std::string target_ns, WriteNamespace(resource, ns, object, "update"));
  ASSIGN_OR_RETURN(const std::string name, ObjectName(resource, object, "update"));
  Json body = object;
  FillTypeMeta(resource, body);
  return impl_->SendForObject("update", resource, http::methods::PUT,
                              resource.ObjectPath(target_ns, name), &body);
}

absl::StatusOr<Json> RestKubeClient::UpdateStatus(const Resource& resource, absl::string_view ns,
                                                  const Json& object) {
  ASSIGN_OR_RETURN(const std::string target_ns,
                   WriteNamespace(resource, ns, object, "update status"));
  ASSIGN_OR_RETURN(const std::string name, ObjectName(resource, object, "update status"));
  Json body = object;
  FillTypeMeta(resource, body);
  return impl_->SendForObject("update_status", resource, http::methods::PUT,
                              resource.ObjectPath(target_ns, name) + "/status", &body);
}

absl::Status RestKubeClient::Delete(const Resource& resource, absl::string_view ns,
                                    absl::string_view name, const DeleteOptions& options) {
  if (name.empty()) return absl::InvalidArgumentError("delete " + resource.plural + ": no name");
  Json body = {{"kind", "DeleteOptions"},
               {"apiVersion", "v1"},
               {"propagationPolicy", PropagationName(options.propagation)}};
  if (!options.precondition_uid.empty()) {
    body["preconditions"] = {{"uid", options.precondition_uid}};
  }
  if (options.grace_period_seconds >= 0) {
    body["gracePeriodSeconds"] = options.grace_period_seconds;
  }
  const std::string target = resource.ObjectPath(ns, name);
  ASSIGN_OR_RETURN(const Answer answer,
                   impl_->Send("delete", resource, http::methods::DEL, target, &body));
  return StatusFromHttp(answer.code, answer.body, absl::StrCat("DELETE ", target));
}

absl::Status RestKubeClient::CheckResourceServed(const Resource& resource) {
  const std::string target = resource.GroupVersionPath();
  ASSIGN_OR_RETURN(const Answer answer,
                   impl_->Send("get", resource, http::methods::GET, target, nullptr));
  if (answer.code == 404) return NotInstalled(resource, impl_->server());
  const std::string what = absl::StrCat("GET ", target);
  RETURN_IF_ERROR(StatusFromHttp(answer.code, answer.body, what));
  ASSIGN_OR_RETURN(const Json discovery, ParseObject(answer, what));
  if (auto resources = discovery.find("resources");
      resources != discovery.end() && resources->is_array()) {
    for (const Json& entry : *resources) {
      const auto name = entry.is_object() ? entry.find("name") : entry.end();
      if (name != entry.end() && name->is_string() && *name == resource.plural) {
        return absl::OkStatus();
      }
    }
  }
  return NotInstalled(resource, impl_->server());
}

}  // namespace psflow::kube
