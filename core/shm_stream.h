// The bulk channel between two processes of one host (core/bulk_stream.h's third kind): the same
// frames as on TCP (core/bulk_wire.h), moved through two byte rings in memory both processes map,
// with no system call per message while both sides keep up.
//
// The client (a worker) connects to the ps task's Unix socket, which the ps advertised over gRPC
// with a random token. Its handshake makes a shared-memory file (memfd: one ring per direction,
// each with one producer and one consumer) and four eventfds (per ring: "bytes to read" and
// "room to write"), and sends them with the token over the Unix socket (SCM_RIGHTS). The server
// accepts them only with its own token (a worker that did not learn it over the job's gRPC, or
// a socket of another task at the same path on another host, gets the connection closed) and a
// file of the layout this code writes. After that the Unix socket carries nothing: its end (the
// peer's process gone, or Shutdown) is what tells either side the connection is over.
//
// Bytes are copied once into the ring and once out of it, as the kernel copies TCP's; a side
// that finds its ring empty (or full) waits on its eventfd, and the other side writes to that
// eventfd only when it has said it waits (a flag in the ring, Dekker's pattern with seq_cst
// operations), so a busy channel makes no system calls. One thread may read while another writes.
// Errors as core/socket.h's: UNAVAILABLE for a closed connection (with the bytes still to go) or
// a failed handshake (naming why), DEADLINE_EXCEEDED at a deadline.
#ifndef PSFLOW_CORE_SHM_STREAM_H_
#define PSFLOW_CORE_SHM_STREAM_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/bulk_stream.h"
#include "core/socket.h"

namespace psflow {

// The longest Unix socket path (sun_path less its terminating NUL).
inline constexpr size_t kMaxUnixSocketPath = 107;
// Bytes of each direction's ring, by default: big enough for a chunk's frame to move in a few
// steps, small enough to stay in the caches the two cores share.
inline constexpr size_t kDefaultShmRingBytes = 1 << 20;

// A Unix stream socket listening at `path` (mode 0600: only this user connects). A socket file
// left there by an earlier process is replaced; any other file is not (INVALID_ARGUMENT, as for a
// path longer than kMaxUnixSocketPath). "@name" is Linux's abstract namespace instead: no file,
// gone with the socket, reachable from the processes of this network namespace (whom the token
// sorts out).
absl::StatusOr<Socket> ListenUnix(const std::string& path);
// The next connection on `listener`; UNAVAILABLE once the listener is shut down, or for an error
// accept(2) reports.
absl::StatusOr<Socket> AcceptUnix(const Socket& listener);
// A connection to the Unix socket at `path` (UNAVAILABLE when nothing listens there).
absl::StatusOr<Socket> ConnectUnix(const std::string& path);

enum class ShmSide { kClient, kServer };

// A shared-memory stream over the connected Unix socket `socket`. Its Handshake exchanges the
// memory and eventfds as the header says: the client makes them (rings of `ring_bytes`, at least
// 4 KiB and a power of two) and sends them with `token`; the server takes them and checks the
// token (1 to 64 bytes) and the layout.
std::unique_ptr<BulkStream> MakeShmStream(Socket socket, ShmSide side, std::string token,
                                          size_t ring_bytes = kDefaultShmRingBytes);

}  // namespace psflow

#endif  // PSFLOW_CORE_SHM_STREAM_H_
