// The byte stream of one bulk channel connection (core/bulk_wire.h): plain TCP, or TLS 1.3 over it
// with mutual authentication by the job's certificates (or shared memory between processes of one
// host: core/shm_stream.h) (the same trust as gRPC's under
// core/transport_security.h: each side presents its certificate, signed by the job's CA; the
// client also checks that the ps's certificate names the host it dialled).
//
// One thread may read while another writes. Under TLS, OpenSSL does the handshake (TLS 1.3,
// AES-128-GCM preferred, ALPN "psflow-bulk-sealed1": a peer without it is refused at once, saying
// so), the server confirms it in one TLS record (a client it refused reads its alert), and the
// bytes after it move as sealed records keyed from the session (core/sealed_records.h): a write
// seals from the caller's buffer and sends up to two 256 KiB records per system call; a read
// opens each record where the caller wants its bytes. The two directions share no lock. Every
// wait ends at a deadline. Errors as core/socket.h: UNAVAILABLE for
// a closed or broken connection (and a failed handshake or certificate check, naming why),
// DEADLINE_EXCEEDED at a deadline.
#ifndef PSFLOW_CORE_BULK_STREAM_H_
#define PSFLOW_CORE_BULK_STREAM_H_

#include <sys/uio.h>

#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/socket.h"
#include "core/transport_security.h"

namespace psflow {

// TLS settings shared by a process's bulk connections of one role: the CA to trust, the
// certificate and key to present, TLS 1.3 only, no session tickets. Thread-safe.
class BulkTlsContext {
 public:
  enum class Role { kClient, kServer };
  // INVALID_ARGUMENT when `security` is plaintext or its PEM text does not load.
  static absl::StatusOr<std::shared_ptr<const BulkTlsContext>> Make(
      const TransportSecurity& security, Role role);
  ~BulkTlsContext();
  BulkTlsContext(const BulkTlsContext&) = delete;
  BulkTlsContext& operator=(const BulkTlsContext&) = delete;

  Role role() const { return role_; }
  void* native() const { return ctx_; }  // the SSL_CTX

 private:
  BulkTlsContext(void* ctx, Role role) : ctx_(ctx), role_(role) {}
  void* ctx_;
  Role role_;
};

class BulkStream {
 public:
  // Plaintext over `socket`.
  static std::unique_ptr<BulkStream> Plain(Socket socket);
  // TLS over `socket` in tls's role; the client checks that the peer's certificate names `host`
  // (a DNS name or an IP address). Handshake before anything else.
  static std::unique_ptr<BulkStream> Tls(Socket socket, std::shared_ptr<const BulkTlsContext> tls,
                                         const std::string& host);
  virtual ~BulkStream() = default;

  // Before Handshake: waits by `deadline` for the peer's first byte and says whether it hung up
  // without one (a probe: a second ps checking that its socket is live, a TCP health check).
  // False on anything else, a deadline or an error included: Handshake meets those and says so.
  bool HungUpWithoutAWord(SteadyTime deadline) const;
  // TLS: the handshake and the peer's certificate check, by `deadline`. Plain: nothing.
  virtual absl::Status Handshake(SteadyTime deadline) = 0;
  // As core/socket.h's of the same names.
  virtual absl::Status WriteAll(std::span<iovec> pieces, SteadyTime deadline,
                                absl::string_view what) = 0;
  virtual absl::Status ReadAll(std::span<iovec> pieces, SteadyTime deadline,
                               absl::string_view what) = 0;
  absl::Status ReadAll(void* data, size_t size, SteadyTime deadline, absl::string_view what);
  virtual absl::StatusOr<bool> ReadAllOrEnd(void* data, size_t size, SteadyTime deadline,
                                            absl::string_view what) = 0;
  virtual absl::StatusOr<bool> WaitReadable(SteadyTime deadline) = 0;
  // Ends both directions now (any thread): blocked reads and writes return.
  virtual void Shutdown() const { socket_.Shutdown(); }
  bool tls() const { return tls_; }

 protected:
  BulkStream(Socket socket, bool tls) : socket_(std::move(socket)), tls_(tls) {}
  const Socket socket_;
  const bool tls_;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_BULK_STREAM_H_
