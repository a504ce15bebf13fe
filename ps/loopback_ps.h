// A ps task served in this process on 127.0.0.1 (a free port): a PsState behind a real gRPC
// server with the bulk tuning and the bulk channel on another free port (advertised as psflow-ps
// does), for tests and benchmarks that want the real transports without processes; plaintext,
// or mutual TLS (both) with a certificate naming 127.0.0.1.
#ifndef PSFLOW_PS_LOOPBACK_PS_H_
#define PSFLOW_PS_LOOPBACK_PS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "core/transport_security.h"
#include "ps/bulk_server.h"
#include "ps/ps_service.h"
#include "ps/ps_state.h"

namespace psflow {

class LoopbackPs {
 public:
  // On `port` of 127.0.0.1, or a free one when 0 (a test restarts a task at its address).
  // bulk: also serve the bulk channel; local_socket: and its shared-memory side there
  // (BulkServer::Options::local_socket).
  explicit LoopbackPs(const TransportSecurity& security = TransportSecurity(), int port = 0,
                      bool bulk = true, const std::string& local_socket = "");
  ~LoopbackPs();  // answers parked calls, then shuts the server down
  LoopbackPs(const LoopbackPs&) = delete;
  LoopbackPs& operator=(const LoopbackPs&) = delete;

  bool started() const { return server_ != nullptr && port_ > 0; }
  std::string address() const;
  // The bulk channel's port; 0 without one.
  int bulk_port() const { return bulk_ != nullptr ? bulk_->port() : 0; }
  // Bulk channel connections accepted so far.
  int bulk_connections() const { return bulk_ != nullptr ? bulk_->accepted() : 0; }
  // Of them, those through shared memory.
  int local_bulk_connections() const { return bulk_ != nullptr ? bulk_->accepted_local() : 0; }
  const PsState& state() const { return state_; }
  // Answers every parked call (as on SIGTERM) without stopping the server.
  void Stop() { service_.Stop(); }

 private:
  PsState state_;
  PsService service_;
  int port_ = 0;
  std::unique_ptr<BulkServer> bulk_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_LOOPBACK_PS_H_
