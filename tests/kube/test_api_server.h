// TestApiServer: a Kubernetes API server on 127.0.0.1 serving an ObjectStore over HTTP/1.1
// (POSIX sockets, a thread per connection, keep-alive). It stays for what a real API server does
// not do on demand — ending every watch (CloseWatches), 410 Gone on every watch (the store's
// Compact), going unreachable and coming back (Stop/Resume), scripted 403s (Forbid), a missing
// CRD — in operator_faults_test, and as the fast in-process server of bench_operator_scale
// --apiserver=test. Everything else about the operator is tested against a real kube-apiserver
// (tests/control_plane). It does not prune by schema, and it bumps resourceVersion on a write
// that changes nothing: a real server does neither. ApiHandler (api_handler.h) says what it
// answers:
//   /api, /apis, /api/v1, /apis/<group>[/<version>], /version, /healthz: discovery;
//   .../<plural> and .../namespaces/<ns>/<plural>: GET (list; watch with watch=true), POST;
//   .../<plural>/<name>: GET, PUT, DELETE (body: DeleteOptions); .../<name>/status: GET, PUT.
// Query parameters: labelSelector, resourceVersion, watch, timeoutSeconds, allowWatchBookmarks,
// propagationPolicy, gracePeriodSeconds. Watches stream one JSON event per line in a chunked
// body; a watch that Compact() ends gets an ERROR event with a 410 Status. Errors are
// metav1.Status bodies (kube::StatusObjectFor). Not served: TLS, PATCH, deletecollection, field
// selectors, pagination (limit/continue are ignored), other subresources.
#ifndef PSFLOW_TESTS_KUBE_TEST_API_SERVER_H_
#define PSFLOW_TESTS_KUBE_TEST_API_SERVER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "operator/kube/resource.h"
#include "tests/kube/api_handler.h"
#include "tests/kube/object_store.h"

namespace psflow::kubetest {

// Thread-safe.
class TestApiServer {
 public:
  struct Options {
    int port = 0;              // 0: a free port
    std::string bearer_token;  // non-empty: requests without "Authorization: Bearer <it>" get 401
    std::string user = "system:serviceaccount:default:psflow-operator";  // in 403 messages
  };

  // Listens on 127.0.0.1:<options.port> and serves `store` (which must outlive the server).
  // UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<TestApiServer>> Start(ObjectStore* store, Options options);
  // Stop()s.
  ~TestApiServer();
  TestApiServer(const TestApiServer&) = delete;
  TestApiServer& operator=(const TestApiServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:<port>"

  // Closes the listener and every connection, watches included, and waits for their threads:
  // to a client the API server is unreachable (connection refused). Idempotent.
  void Stop();
  // Listens again on the same port. UNAVAILABLE when it is taken meanwhile.
  absl::Status Resume();
  bool serving() const;

  // Ends every watch stream being served (cleanly: the chunked body ends), as an API server
  // restart does; clients watch again from their last resourceVersion. The store's own watches
  // (MemoryKubeClient's) are not touched: ObjectStore::CloseWatches ends those.
  void CloseWatches() { handler_.CloseWatches(); }
  // Requests of `verb` (verbs.h; "update_status" for PUT .../status) on `resource` get 403 with
  // the API server's message, e.g. `trainingjobs.psflow.io is forbidden: User
  // "system:serviceaccount:default:psflow-operator" cannot list resource "trainingjobs" in API
  // group "psflow.io" in the namespace "default"`.
  void Forbid(absl::string_view verb, const kube::Resource& resource) {
    handler_.Forbid(verb, resource);
  }
  void AllowAll() { handler_.AllowAll(); }

  // Requests received: all of them (discovery, 401s and 403s included), or the authenticated
  // ones of one verb.
  int64_t RequestCount() const { return handler_.RequestCount(); }
  int64_t RequestCount(absl::string_view verb) const { return handler_.RequestCount(verb); }
  // Connections open now.
  int OpenConnectionCount() const;

  // Writes a kubeconfig for this server (kubeconfig.h), with the bearer token when there is one.
  absl::Status WriteKubeconfig(const std::string& path) const;

 private:
  struct Connection {
    int fd = -1;  // -1 once its thread closed it
    bool done = false;
    std::thread thread;
  };

  TestApiServer(ObjectStore* store, Options options);
  absl::Status Listen(int port);
  void AcceptLoop();
  void Serve(Connection* connection);
  // Joins and forgets the connections whose threads have finished.
  void ReapFinished();

  const Options options_;
  ApiHandler handler_;
  std::atomic<int> port_{0};
  std::atomic<bool> stopping_{false};
  std::mutex lifecycle_mu_;  // serializes Stop and Resume
  mutable std::mutex mu_;
  int listen_fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::thread accept_thread_;  // written by Listen/Stop under lifecycle_mu_
  std::list<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_TEST_API_SERVER_H_
