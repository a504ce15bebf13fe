#include "tests/kube/test_api_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "tests/kube/http_connection.h"
#include "tests/kube/kubeconfig.h"

namespace psflow::kubetest {

TestApiServer::TestApiServer(ObjectStore* store, Options options)
    : options_(std::move(options)),
      handler_(store, {.bearer_token = options_.bearer_token, .user = options_.user}) {}

absl::StatusOr<std::unique_ptr<TestApiServer>> TestApiServer::Start(ObjectStore* store,
                                                                    Options options) {
  const int port = options.port;
  std::unique_ptr<TestApiServer> server(new TestApiServer(store, std::move(options)));
  {
    std::lock_guard lock(server->lifecycle_mu_);
    RETURN_IF_ERROR(server->Listen(port));
  }
  return server;
}

TestApiServer::~TestApiServer() { Stop(); }

std::string TestApiServer::url() const { return absl::StrCat("http://127.0.0.1:", port_.load()); }

absl::Status TestApiServer::Listen(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  // Resume() must get the same port back while old connections sit in TIME_WAIT.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, SOMAXCONN) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("test API server cannot listen on 127.0.0.1:", port, ": ", why));
  }
  port_ = ntohs(addr.sin_port);
  stopping_ = false;
  {
    std::lock_guard lock(mu_);
    listen_fd_ = fd;
  }
  accept_thread_ = std::thread(&TestApiServer::AcceptLoop, this);
  return absl::OkStatus();
}

void TestApiServer::AcceptLoop() {
  int listen_fd;
  {
    std::lock_guard lock(mu_);
    listen_fd = listen_fd_;  // closed only after this thread is joined
  }
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Stop() shuts the listener down, which fails accept with EINVAL.
      if (stopping_.load()) return;
      if (errno != EINTR && errno != ECONNABORTED) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // out of fds, say
      }
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ReapFinished();
    std::lock_guard lock(mu_);
    if (stopping_.load()) {
      ::close(fd);
      return;
    }
    connections_.push_back(std::make_unique<Connection>());
    Connection* connection = connections_.back().get();
    connection->fd = fd;
    connection->thread = std::thread(&TestApiServer::Serve, this, connection);
  }
}

void TestApiServer::Serve(Connection* connection) {
  int fd;
  {
    std::lock_guard lock(mu_);
    fd = connection->fd;
  }
  HttpConnection http(fd);
  const std::string address = absl::StrCat("127.0.0.1:", port_.load());
  for (;;) {
    absl::StatusOr<HttpRequest> request = http.ReadRequest();
    if (!request.ok()) {
      if (absl::IsInvalidArgument(request.status())) {
        (void)http.WriteResponse(400, "application/json",
                                 StatusBody(400, "BadRequest", request.status().message()).dump(),
                                 false);
      } else if (absl::IsResourceExhausted(request.status())) {
        (void)http.WriteResponse(
            413, "application/json",
            StatusBody(413, "RequestEntityTooLarge", request.status().message()).dump(), false);
      }
      break;  // or the peer closed the connection
    }
    if (!handler_.Handle(*request, http, address, stopping_) || stopping_.load()) break;
  }
  std::lock_guard lock(mu_);
  ::close(connection->fd);
  connection->fd = -1;
  connection->done = true;
}

void TestApiServer::ReapFinished() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if ((*it)->done) {
        finished.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& connection : finished) connection->thread.join();
}

void TestApiServer::Stop() {
  std::lock_guard lifecycle(lifecycle_mu_);
  {
    std::lock_guard lock(mu_);
    if (listen_fd_ < 0) return;
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    // Wakes every connection thread blocked in recv or send; watch loops see stopping_.
    for (auto& connection : connections_) {
      if (connection->fd >= 0) ::shutdown(connection->fd, SHUT_RDWR);
    }
  }
  accept_thread_.join();
  std::list<std::unique_ptr<Connection>> all;
  {
    std::lock_guard lock(mu_);
    ::close(listen_fd_);
    listen_fd_ = -1;
    all.swap(connections_);
  }
  for (auto& connection : all) connection->thread.join();
}

absl::Status TestApiServer::Resume() {
  std::lock_guard lifecycle(lifecycle_mu_);
  {
    std::lock_guard lock(mu_);
    if (listen_fd_ >= 0) return absl::OkStatus();
  }
  return Listen(port_.load());
}

bool TestApiServer::serving() const {
  std::lock_guard lock(mu_);
  return listen_fd_ >= 0;
}

int TestApiServer::OpenConnectionCount() const {
  std::lock_guard lock(mu_);
  int open = 0;
  for (const auto& connection : connections_) open += connection->done ? 0 : 1;
  return open;
}

absl::Status TestApiServer::WriteKubeconfig(const std::string& path) const {
  return WriteKubeconfigFile(path, url(), options_.bearer_token);
}

}  // namespace psflow::kubetest
