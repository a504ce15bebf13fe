#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

// Milliseconds until the deadline for poll(), at least 0, at most a day.
int PollTimeout(SteadyTime deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 24 * 3600 * 1000));
}

// TCP_NODELAY, and keep-alive probes (kKeepAlive) so that a connection whose peer vanished
// (its host died, a FIN or RST lost) fails instead of waiting forever for its next message.
absl::Status TuneTcp(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return ErrnoError("TCP_NODELAY", errno);
  }
  const int idle = static_cast<int>(kKeepAlive.idle.count());
  const int interval = static_cast<int>(kKeepAlive.interval.count());
  const int probes = kKeepAlive.probes;
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes)) != 0) {
    return ErrnoError("TCP keep-alive", errno);
  }
  return absl::OkStatus();
}

// Drops `n` transferred bytes from the front of `pieces`.
std::span<iovec> Advance(std::span<iovec> pieces, size_t n) {
  while (!pieces.empty() && n >= pieces.front().iov_len) {
    n -= pieces.front().iov_len;
    pieces = pieces.subspan(1);
  }
  if (n > 0) {
    pieces.front().iov_base = static_cast<char*>(pieces.front().iov_base) + n;
    pieces.front().iov_len -= n;
  }
  return pieces;
}

std::span<iovec> SkipEmpty(std::span<iovec> pieces) {
  while (!pieces.empty() && pieces.front().iov_len == 0) pieces = pieces.subspan(1);
  return pieces;
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void Socket::Shutdown() const {
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

void Socket::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status ErrnoError(absl::string_view what, int err) {
  char buf[256];
  const char* message = strerror_r(err, buf, sizeof(buf));  // GNU: returns the message
  return absl::UnavailableError(absl::StrCat(what, ": ", message));
}

absl::StatusOr<Socket> ListenTcp(const std::string& bind_address, int port, int* bound_port) {
  const std::string where = absl::StrCat(bind_address, ":", port);
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, bind_address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, bind_address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", where, ": not an IPv4 or IPv6 address"));
  }
  Socket s(socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return ErrnoError("socket()", errno);
  const int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    return ErrnoError(absl::StrCat("bind ", where), errno);
  }
  if (listen(s.fd(), 64) != 0) return ErrnoError(absl::StrCat("listen on ", where), errno);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoError(absl::StrCat("getsockname of ", where), errno);
  }
  *bound_port = ntohs(addr.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
  return s;
}

absl::StatusOr<Socket> AcceptTcp(const Socket& listener) {
  for (;;) {
    Socket s(accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (s.valid()) {
      if (absl::Status st = TuneTcp(s.fd()); !st.ok()) return st;
      return s;
    }
    // A connection that went away before we took it is not the listener's end.
    if (errno == EINTR || errno == ECONNABORTED) continue;
    return ErrnoError("accept", errno);
  }
}

absl::StatusOr<Socket> ConnectTcp(const std::string& host, int port, SteadyTime deadline) {
  const std::string where = absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", host));
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Socket s(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!s.valid()) {
      last = ErrnoError("socket()", errno);
      continue;
    }
    int rc = connect(s.fd(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      absl::StatusOr<bool> writable = WaitFor(s, POLLOUT, deadline, where);
      if (!writable.ok()) {
        last = writable.status();
        continue;
      }
      if (!*writable) {
        last = absl::DeadlineExceededError(absl::StrCat("connect to ", where, ": timed out"));
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = ErrnoError(absl::StrCat("connect to ", where), errno);
      continue;
    }
    const int flags = fcntl(s.fd(), F_GETFL);
    fcntl(s.fd(), F_SETFL, flags & ~O_NONBLOCK);
    if (absl::Status st = TuneTcp(s.fd()); !st.ok()) {
      last = st;
      continue;
    }
    freeaddrinfo(found);
    return s;
  }
  freeaddrinfo(found);
  return last;
}

absl::Status WriteAll(const Socket& s, std::span<iovec> pieces, SteadyTime deadline,
                      absl::string_view what) {
  pieces = SkipEmpty(pieces);
  while (!pieces.empty()) {
    msghdr msg{};
    msg.msg_iov = pieces.data();
    msg.msg_iovlen = std::min<size_t>(pieces.size(), IOV_MAX);
    const ssize_t n = sendmsg(s.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      pieces = SkipEmpty(Advance(pieces, static_cast<size_t>(n)));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return ErrnoError(what, errno);
    absl::StatusOr<bool> writable = WaitFor(s, POLLOUT, deadline, what);
    if (!writable.ok()) return writable.status();
    if (!*writable) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": the peer did not take it all by the deadline (", TotalBytes(pieces),
                       " bytes left)"));
    }
  }
  return absl::OkStatus();
}

namespace {

// ReadAll; *ended (when not null) tells a close before the first byte from an error.
absl::Status Read(const Socket& s, std::span<iovec> pieces, SteadyTime deadline,
                  absl::string_view what, bool* ended) {
  pieces = SkipEmpty(pieces);
  const size_t total = TotalBytes(pieces);
  while (!pieces.empty()) {
    absl::StatusOr<size_t> n = ReadSome(s, pieces, deadline, what);
    if (!n.ok()) {
      if (!absl::IsDeadlineExceeded(n.status())) return n.status();
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": it did not all arrive by the deadline (", TotalBytes(pieces), " bytes to go)"));
    }
    if (*n > 0) {
      pieces = SkipEmpty(Advance(pieces, *n));
      continue;
    }
    if (ended != nullptr && TotalBytes(pieces) == total) {
      *ended = true;
      return absl::OkStatus();
    }
    return absl::UnavailableError(
        absl::StrCat(what, ": connection closed with ", TotalBytes(pieces), " bytes to go"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<size_t> ReadSome(const Socket& s, std::span<iovec> pieces, SteadyTime deadline,
                                absl::string_view what) {
  for (;;) {
    msghdr msg{};
    msg.msg_iov = pieces.data();
    msg.msg_iovlen = std::min<size_t>(pieces.size(), IOV_MAX);
    const ssize_t n = recvmsg(s.fd(), &msg, MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return ErrnoError(what, errno);
    absl::StatusOr<bool> readable = WaitFor(s, POLLIN, deadline, what);
    if (!readable.ok()) return readable.status();
    if (!*readable) return absl::DeadlineExceededError(absl::StrCat(what, ": nothing arrived"));
  }
}

absl::Status ReadAll(const Socket& s, std::span<iovec> pieces, SteadyTime deadline,
                     absl::string_view what) {
  return Read(s, pieces, deadline, what, nullptr);
}

absl::Status ReadAll(const Socket& s, void* data, size_t size, SteadyTime deadline,
                     absl::string_view what) {
  iovec piece{data, size};
  return Read(s, std::span<iovec>(&piece, 1), deadline, what, nullptr);
}

absl::StatusOr<bool> ReadAllOrEnd(const Socket& s, void* data, size_t size, SteadyTime deadline,
                                  absl::string_view what) {
  iovec piece{data, size};
  bool ended = false;
  if (absl::Status st = Read(s, std::span<iovec>(&piece, 1), deadline, what, &ended); !st.ok()) {
    return st;
  }
  return !ended;
}

absl::StatusOr<bool> WaitFor(const Socket& s, short events, SteadyTime deadline,
                             absl::string_view what) {
  for (;;) {
    pollfd pfd{s.fd(), events, 0};
    const int n = poll(&pfd, 1, PollTimeout(deadline));
    if (n > 0) return true;
    if (n == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) return ErrnoError(absl::StrCat("poll for ", what), errno);
  }
}

size_t TotalBytes(std::span<const iovec> pieces) {
  size_t n = 0;
  for (const iovec& v : pieces) n += v.iov_len;
  return n;
}

absl::StatusOr<bool> WaitReadable(const Socket& s, SteadyTime deadline) {
  return WaitFor(s, POLLIN, deadline, "a bulk connection");
}

}  // namespace psflow
