// KubeClient over HTTP(S) to a real API server, with cpprestsdk.
//
// Every request waits its turn in a token-bucket rate limiter, carries the bearer token (if any)
// and is reported to the observer. Errors follow kube_client.h; in addition a request the server
// never answered (connection refused or dropped, TLS handshake failure) is UNAVAILABLE naming the
// server URL, and one that saw no data for Options::request_timeout is DEADLINE_EXCEEDED. No
// exception escapes.
#ifndef PSFLOW_OPERATOR_KUBE_REST_CLIENT_H_
#define PSFLOW_OPERATOR_KUBE_REST_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/kubeconfig.h"

namespace psflow::kube {

// "psflow-operator/<project version>".
std::string DefaultUserAgent();

class RestKubeClient final : public KubeClient {
 public:
  // Called once per request, after it ends, on the calling thread. verb: get, list, watch,
  // create, update, update_status or delete (CheckResourceServed's discovery request is a get).
  // http_code: the answer's status, 0 when there was none (connection failure, timeout,
  // cancelled before the answer). seconds: from sending to the end of the answer (for a watch,
  // the whole watch), rate-limiter wait excluded. Must not block.
  using RequestObserver = std::function<void(absl::string_view verb, const Resource& resource,
                                             int http_code, double seconds)>;

  struct Options {
    double qps = 20;  // <= 0: unlimited
    int burst = 30;
    // How long a request may go without any data from the server. A watch is given its
    // timeout_seconds (or an hour when the server chooses) on top of this.
    std::chrono::milliseconds request_timeout{30'000};
    std::string user_agent = DefaultUserAgent();
    RequestObserver observer;  // may be empty
  };

  // INVALID_ARGUMENT (naming config.source) for a server URL cpprestsdk cannot use or a PEM
  // OpenSSL rejects. Connects to nothing yet.
  static absl::StatusOr<std::unique_ptr<RestKubeClient>> Create(const ClusterConfig& config,
                                                                Options options);
  ~RestKubeClient() override;

  absl::StatusOr<Json> Get(const Resource& resource, absl::string_view ns,
                           absl::string_view name) override;
  // Items get apiVersion and kind filled in (the API server leaves them out of lists).
  absl::StatusOr<ObjectList> List(const Resource& resource, absl::string_view ns,
                                  const ListOptions& options) override;
  // Streams the body as it arrives; events are delivered on the calling thread. `stop` closes
  // the connection: CANCELLED within milliseconds.
  absl::Status Watch(const Resource& resource, absl::string_view ns, const ListOptions& options,
                     std::stop_token stop,
                     const std::function<void(const WatchEvent&)>& on_event) override;
  // For a namespaced resource, an empty `ns` means the object's metadata.namespace. apiVersion
  // and kind are filled in when the object lacks them.
  absl::StatusOr<Json> Create(const Resource& resource, absl::string_view ns,
                              const Json& object) override;
  absl::StatusOr<Json> Update(const Resource& resource, absl::string_view ns,
                              const Json& object) override;
  absl::StatusOr<Json> UpdateStatus(const Resource& resource, absl::string_view ns,
                                    const Json& object) override;
  absl::Status Delete(const Resource& resource, absl::string_view ns, absl::string_view name,
                      const DeleteOptions& options) override;

  // Whether the API server serves `resource` (from its group-version discovery document): OK,
  // or NOT_FOUND saying the CRD (or built-in resource) is not installed; other errors as above.
  // The operator asks at start-up.
  absl::Status CheckResourceServed(const Resource& resource);

  const std::string& server() const;

 private:
  class Impl;
  explicit RestKubeClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_REST_CLIENT_H_
