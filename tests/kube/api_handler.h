// ApiHandler: answers Kubernetes API requests from an ObjectStore, as the API server does:
// authentication (a bearer token), authorization (a list of forbidden verb/resource pairs),
// discovery, the verbs, watch streams and metav1.Status errors. The HTTP transport is
// TestApiServer's; this is what it says.
#ifndef PSFLOW_TESTS_KUBE_API_HANDLER_H_
#define PSFLOW_TESTS_KUBE_API_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "operator/kube/resource.h"
#include "tests/kube/api_path.h"
#include "tests/kube/http_connection.h"
#include "tests/kube/object_store.h"

namespace psflow::kubetest {

// A metav1.Status body for errors kube::StatusObjectFor has no code for (400 BadRequest, 405
// MethodNotAllowed, 413 RequestEntityTooLarge).
nlohmann::json StatusBody(int code, absl::string_view reason, absl::string_view message);

// Thread-safe: one Handle call per connection thread.
class ApiHandler {
 public:
  struct Options {
    std::string bearer_token;  // non-empty: requests without it are 401
    std::string user;          // named in 403 messages
  };

  // `store` must outlive the handler.
  ApiHandler(ObjectStore* store, Options options);

  // Answers `request` on `connection`; `server_address` ("127.0.0.1:<port>") goes into /api.
  // A watch streams until it ends, CloseWatches() is called, `stopping` turns true or the peer
  // goes. Returns whether the connection may carry another request.
  bool Handle(const HttpRequest& request, HttpConnection& connection,
              absl::string_view server_address, const std::atomic<bool>& stopping);

  // Ends every watch stream being served (the chunked body ends cleanly).
  void CloseWatches();
  // Requests of `verb` (verbs.h) on `resource` get 403 Forbidden, in any namespace.
  void Forbid(absl::string_view verb, const kube::Resource& resource);
  void AllowAll();
  // Every request received, discovery and rejected ones included.
  int64_t RequestCount() const;
  // Authenticated requests of one verb (verbs.h), whatever their outcome (403s included).
  int64_t RequestCount(absl::string_view verb) const;

 private:
  struct Reply {
    int code;
    nlohmann::json body;
  };

  bool HandleResource(const HttpRequest& request, const ApiPath& path, HttpConnection& connection,
                      const std::atomic<bool>& stopping);
  // Streams a watch; returns whether the connection may carry another request.
  bool ServeWatch(const HttpRequest& request, const ObjectStore::Registered& registered,
                  const std::string& ns, HttpConnection& connection,
                  const std::atomic<bool>& stopping);
  Reply Forbidden(absl::string_view verb, const kube::Resource& resource, const ApiPath& path,
                  absl::string_view name) const;
  bool IsForbidden(absl::string_view verb, const kube::Resource& resource) const;
  void CountVerb(absl::string_view verb);

  ObjectStore* const store_;
  const Options options_;
  std::atomic<int64_t> watch_epoch_{0};  // CloseWatches() moves it; watches end on a change
  mutable std::mutex mu_;
  std::set<std::pair<std::string, std::string>> forbidden_ ABSL_GUARDED_BY(mu_);
  int64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t, std::less<>> verb_requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_API_HANDLER_H_
