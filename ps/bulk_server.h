// The bulk channel's server side (core/bulk_wire.h): a ps task's tensor bytes on TCP connections
// (plaintext, or mutual TLS with the job's certificates: core/bulk_stream.h), and optionally
// through shared memory with workers of its host (core/shm_stream.h, on a Unix socket), beside
// its gRPC service, which keeps the control calls and advertises this channel
// (InitializeResponse/WaitReadyResponse.bulk_port and local_bulk).
//
// Each accepted connection has a reader thread and a writer thread. The reader takes one request
// at a time into the connection's buffer and handles it as the gRPC service does (PsState::Push
// applied straight from that buffer; a pull checked and parked, ps/parked_pull.h); replies go to
// the writer, which sends a float32 pull's values from the partitions' own pinned blocks
// (PsState::PinPull: no copy in user space) and a 16-bit one from a buffer filled once.
//
// A peer that sends something other than the protocol (a bad hello, an unknown kind, a body over
// kMaxBulkMessageBytes), does not finish sending a message within Options::stall_timeout of its
// first byte, or leaves a reply unread for as long loses its connection, with one log line; a
// malformed frame in a well-formed message gets an error reply (INVALID_ARGUMENT...) and the
// connection stays. Thread-safe.
#ifndef PSFLOW_PS_BULK_SERVER_H_
#define PSFLOW_PS_BULK_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "core/bulk_stream.h"
#include "core/socket.h"
#include "ps/ps_metrics.h"
#include "ps/ps_state.h"

namespace psflow {

class BulkServer {
 public:
  struct Options {
    std::string bind_address = "0.0.0.0";
    int port = 0;  // 0: a port the OS picks
    // How long a message may take to arrive once begun, a reply to be taken, and the TLS
    // handshake.
    std::chrono::milliseconds stall_timeout = std::chrono::seconds(60);
    // Mutual TLS (a kServer context), or plaintext when null.
    std::shared_ptr<const BulkTlsContext> tls;
    // Connections served at once (each holds two threads and a message buffer); one more is
    // closed as soon as it is accepted, with one WARNING per run of refusals, and its worker falls
    // back to gRPC (PsClient). A job needs one per worker and evaluator (PsClient's
    // connections_per_task each).
    int max_connections = kDefaultMaxConnections;
    // Also serve workers of this host through shared memory (core/shm_stream.h), on a Unix socket
    // at this path (empty: not). Its token (local_token()) goes to workers over gRPC.
    std::string local_socket;
  };
  static constexpr int kDefaultMaxConnections = 1024;

  // Listens as `options` say (INVALID_ARGUMENT for max_connections < 1). state and metrics (may
  // be null) outlive the server.
  static absl::StatusOr<std::unique_ptr<BulkServer>> Start(PsState& state, PsMetrics* metrics,
                                                           const Options& options);
  ~BulkServer();  // Stop, then waits for every connection's threads
  BulkServer(const BulkServer&) = delete;
  BulkServer& operator=(const BulkServer&) = delete;

  int port() const { return port_; }
  // The Unix socket of Options::local_socket, and the token a worker shows there ("" without).
  const std::string& local_socket() const { return local_socket_; }
  const std::string& local_token() const { return local_token_; }
  // Connections accepted so far (counted before the connection answers its hello), and of them
  // those through shared memory.
  int accepted() const { return accepted_.load(); }
  int accepted_local() const { return accepted_local_.load(); }
  // Stops accepting and ends every connection (replies not yet written are dropped). Parked
  // pulls are answered by the PsState's coordinator Stop, not here.
  void Stop();

 private:
  class Connection;
  BulkServer(PsState& state, PsMetrics* metrics, Socket listener, int port, Socket local_listener,
             std::string local_token, const Options& options);
  // Takes connections on `listener` (the TCP port, or the Unix socket when `local`).
  void AcceptLoop(const Socket& listener, bool local);

  PsState& state_;
  PsMetrics* metrics_;
  Socket listener_;
  const int port_;
  Socket local_listener_;
  const std::string local_socket_;
  const std::string local_token_;
  const std::chrono::milliseconds stall_timeout_;
  const std::shared_ptr<const BulkTlsContext> tls_;
  const size_t max_connections_;
  std::atomic<int> accepted_{0};
  std::atomic<int> accepted_local_{0};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool accept_failing_ ABSL_GUARDED_BY(mu_) = false;
  bool refusing_ ABSL_GUARDED_BY(mu_) = false;  // at max_connections_
  std::vector<std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  std::thread acceptor_;
  std::thread local_acceptor_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_BULK_SERVER_H_
