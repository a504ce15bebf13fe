// Plain TCP sockets with deadlines, for the bulk channel (ps/bulk_server.h, worker/bulk_link.h):
// an owned descriptor, listen/accept/connect, and gathered reads and writes that wait for the
// peer at most until a deadline. Every error is an absl::Status naming what was being done:
// UNAVAILABLE for a refused, reset or closed connection, DEADLINE_EXCEEDED for a peer that did
// not move within the deadline.
#ifndef PSFLOW_CORE_SOCKET_H_
#define PSFLOW_CORE_SOCKET_H_

#include <sys/uio.h>

#include <chrono>
#include <span>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

using SteadyTime = std::chrono::steady_clock::time_point;

// An owned file descriptor, closed on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept;
  ~Socket() { Close(); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Ends both directions: a thread blocked reading or writing it returns at once (the descriptor
  // stays open until Close, so it cannot be reused under that thread).
  void Shutdown() const;
  void Close();

 private:
  int fd_ = -1;
};

// errno as a status: UNAVAILABLE, the message "what: strerror".
absl::Status ErrnoError(absl::string_view what, int err);

// A listening socket on bind_address:port (an IPv4 or IPv6 address; port 0: one the OS picks);
// the port in *bound_port.
absl::StatusOr<Socket> ListenTcp(const std::string& bind_address, int port, int* bound_port);
// The keep-alive of every connection AcceptTcp and ConnectTcp make: a peer silent this long is
// probed, and given up after this many probes unanswered (about 25 s, as gRPC's keepalive of
// core/grpc_tuning.h finds a vanished peer in about 20 s); a read or poll then fails.
struct KeepAlive {
  std::chrono::seconds idle;
  std::chrono::seconds interval;
  int probes;
};
inline constexpr KeepAlive kKeepAlive = {std::chrono::seconds(10), std::chrono::seconds(5), 3};

// The next connection on `listener` (TCP_NODELAY and kKeepAlive set); UNAVAILABLE once the
// listener is shut down, or for an error accept(2) reports (out of descriptors, a network error:
// retry).
absl::StatusOr<Socket> AcceptTcp(const Socket& listener);
// A connection to host:port (a name or an address; TCP_NODELAY and kKeepAlive set), trying each
// address the name resolves to until the deadline.
absl::StatusOr<Socket> ConnectTcp(const std::string& host, int port, SteadyTime deadline);

// Writes every byte of `pieces` (advancing them), waiting for the peer to take them at most until
// `deadline`.
absl::Status WriteAll(const Socket& s, std::span<iovec> pieces, SteadyTime deadline,
                      absl::string_view what);
// Fills every byte of `pieces` (advancing them) from the socket, waiting at most until
// `deadline`. UNAVAILABLE when the peer closes first, saying how many bytes were missing.
absl::Status ReadAll(const Socket& s, std::span<iovec> pieces, SteadyTime deadline,
                     absl::string_view what);
absl::Status ReadAll(const Socket& s, void* data, size_t size, SteadyTime deadline,
                     absl::string_view what);
// Reads into `pieces` (not advancing them) what the socket has, waiting for the first byte at
// most until `deadline`: the bytes read (> 0), 0 when the peer closed, DEADLINE_EXCEEDED when
// none came in time.
absl::StatusOr<size_t> ReadSome(const Socket& s, std::span<iovec> pieces, SteadyTime deadline,
                                absl::string_view what);
// ReadAll of a message that may not come: false (OK) when the peer closes the connection before
// its first byte.
absl::StatusOr<bool> ReadAllOrEnd(const Socket& s, void* data, size_t size, SteadyTime deadline,
                                  absl::string_view what);
// True once poll(2) reports `events` (POLLIN, POLLOUT) on the socket, false at the deadline.
absl::StatusOr<bool> WaitFor(const Socket& s, short events, SteadyTime deadline,
                             absl::string_view what);
// True once the socket has bytes (or an end) to read, false at the deadline.
absl::StatusOr<bool> WaitReadable(const Socket& s, SteadyTime deadline);
// The bytes `pieces` hold in all.
size_t TotalBytes(std::span<const iovec> pieces);

}  // namespace psflow

#endif  // PSFLOW_CORE_SOCKET_H_
