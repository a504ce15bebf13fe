// An HTTP/1.1 server on 127.0.0.1 (optionally TLS) whose every answer a test scripts,
// byte by byte if need be: whole answers, chunked streams sent piece by piece, connections held
// open or dropped mid-stream. For testing RestKubeClient's handling of the wire; the test API
// server (tests/kube) tests its REST semantics.
#ifndef PSFLOW_TESTS_KUBE_SCRIPTED_HTTP_SERVER_H_
#define PSFLOW_TESTS_KUBE_SCRIPTED_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::kube {

struct HttpExchange {
  std::string method;
  std::string target;                          // path and query, as sent
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

class ScriptedHttpServer {
 public:
  struct Tls {
    std::string cert_file;       // PEM chain the server presents
    std::string key_file;        // its key
    std::string client_ca_file;  // non-empty: a client certificate signed by it is required
  };

  // How a handler answers one request. Every call is a no-op once the connection is gone.
  class Responder {
   public:
    virtual ~Responder() = default;
    // A whole answer with Content-Length.
    virtual void Send(int code, absl::string_view body) = 0;
    // Starts a chunked answer; each Chunk is written at once.
    virtual void StartChunked(int code) = 0;
    virtual void Chunk(absl::string_view data) = 0;
    virtual void EndChunked() = 0;
    // Closes the connection at once, mid-answer or before one.
    virtual void Drop() = 0;
    // Blocks until the client closes the connection (true) or `timeout` passes (false).
    virtual bool WaitForClientClose(std::chrono::milliseconds timeout) = 0;
  };
  using Handler = std::function<void(const HttpExchange&, Responder&)>;

  // Listens on an ephemeral port; each connection is served on its own thread, requests in
  // order. A handler that answers nothing gets its connection closed. With `tls`, SIGPIPE is
  // ignored from then on (OpenSSL writes to sockets with write(2)).
  static absl::StatusOr<std::unique_ptr<ScriptedHttpServer>> Start(Handler handler,
                                                                   const Tls* tls = nullptr);
  // Closes the listener and every connection, then joins the threads.
  ~ScriptedHttpServer();

  std::string url() const;  // "http://127.0.0.1:<port>" or https
  int port() const { return port_; }
  std::vector<HttpExchange> requests() const;

 private:
  class Connection;
  ScriptedHttpServer(Handler handler, int listen_fd, int port, void* ssl_ctx);
  void AcceptLoop();
  void Serve(int fd);

  const Handler handler_;
  const int listen_fd_;
  const int port_;
  void* const ssl_ctx_;  // SSL_CTX*, or null for plain HTTP
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::vector<HttpExchange> requests_ ABSL_GUARDED_BY(mutex_);
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mutex_);
  std::thread acceptor_;
};

}  // namespace psflow::kube

#endif  // PSFLOW_TESTS_KUBE_SCRIPTED_HTTP_SERVER_H_
