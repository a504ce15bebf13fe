// A ps task served in this process on 127.0.0.1 (a free port): a PsState behind a real gRPC
// server with the bulk tuning, for tests and benchmarks that want real gRPC without processes;
// plaintext, or mutual TLS with a certificate naming 127.0.0.1.
#ifndef PSFLOW_PS_LOOPBACK_PS_H_
#define PSFLOW_PS_LOOPBACK_PS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "core/transport_security.h"
#include "ps/ps_service.h"
#include "ps/ps_state.h"

namespace psflow {

class LoopbackPs {
 public:
  // On `port` of 127.0.0.1, or a free one when 0 (a test restarts a task at its address).
  explicit LoopbackPs(const TransportSecurity& security = TransportSecurity(), int port = 0);
  ~LoopbackPs();  // answers parked calls, then shuts the server down
  LoopbackPs(const LoopbackPs&) = delete;
  LoopbackPs& operator=(const LoopbackPs&) = delete;

  bool started() const { return server_ != nullptr && port_ > 0; }
  std::string address() const;
  const PsState& state() const { return state_; }
  // Answers every parked call (as on SIGTERM) without stopping the server.
  void Stop() { service_.Stop(); }

 private:
  PsState state_;
  PsService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_LOOPBACK_PS_H_
