#include "core/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/file_util.h"

namespace psflow {

absl::StatusOr<std::string> HttpGet(absl::string_view host, int port, absl::string_view path,
                                    std::chrono::milliseconds timeout,
                                    absl::string_view user_agent) {
  using Clock = std::chrono::steady_clock;
  constexpr size_t kMaxResponse = size_t{16} << 20;
  const auto deadline = Clock::now() + timeout;
  const std::string where = absl::StrCat("http://", host, ":", port, path);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const std::string host_str(host == "localhost" ? "127.0.0.1" : host);
  if (inet_pton(AF_INET, host_str.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": host must be an IPv4 address"));
  }
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  // Waits until fd is ready for `events` or the deadline passes.
  auto wait = [&](short events) -> absl::Status {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return absl::DeadlineExceededError(absl::StrCat(where, ": timed out"));
      pollfd p{fd.get(), events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left));
      if (n > 0) return absl::OkStatus();
      if (n < 0 && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat(where, ": poll: ", std::strerror(errno)));
      }
    }
  };
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      return absl::UnavailableError(absl::StrCat(where, ": ", std::strerror(errno)));
    }
    if (absl::Status s = wait(POLLOUT); !s.ok()) return s;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return absl::UnavailableError(absl::StrCat(where, ": ", std::strerror(err)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, "\r\nUser-Agent: ", user_agent,
                   "\r\nConnection: close\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    if (absl::Status s = wait(POLLOUT); !s.ok()) return s;
    const ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat(where, ": send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[16384];
  for (;;) {
    if (absl::Status s = wait(POLLIN); !s.ok()) return s;
    const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat(where, ": recv: ", std::strerror(errno)));
    response.append(buf, static_cast<size_t>(n));
    if (response.size() > kMaxResponse) {
      return absl::InternalError(absl::StrCat(where, ": response over 16 MiB"));
    }
  }
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos || response.compare(0, 5, "HTTP/") != 0) {
    return absl::InternalError(absl::StrCat(where, ": malformed HTTP response"));
  }
  const size_t sp = response.find(' ');
  if (response.compare(sp + 1, 3, "200") != 0) {
    return absl::InternalError(
        absl::StrCat(where, ": ", response.substr(sp + 1, response.find('\r') - sp - 1)));
  }
  return response.substr(header_end + 4);
}

}  // namespace psflow
