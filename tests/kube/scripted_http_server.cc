#include "tests/kube/scripted_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace psflow::kube {
namespace {

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 500:
      return "Internal Server Error";
    default:
      return "Status";
  }
}

}  // namespace

// One accepted connection, plain or TLS; the Responder its handler writes through.
class ScriptedHttpServer::Connection final : public Responder {
 public:
  Connection(int fd, SSL* ssl, const std::atomic<bool>& stopping)
      : fd_(fd), ssl_(ssl), stopping_(stopping) {}
  ~Connection() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }

  bool broken() const { return broken_; }
  bool answered() const { return answered_; }
  void NewRequest() { answered_ = false; }

  // The next request, or false when the client closed or sent garbage.
  bool ReadRequest(HttpExchange& exchange) {
    size_t header_end;
    while ((header_end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore()) return false;
    }
    const std::string head = pending_.substr(0, header_end);
    pending_.erase(0, header_end + 4);
    std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
    std::vector<std::string> request_line = absl::StrSplit(lines[0], ' ');
    if (request_line.size() != 3) return false;
    exchange.method = request_line[0];
    exchange.target = request_line[1];
    size_t content_length = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
      std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
      if (name == "content-length" && !absl::SimpleAtoi(value, &content_length)) return false;
      exchange.headers[name] = value;
    }
    while (pending_.size() < content_length) {
      if (!ReadMore()) return false;
    }
    exchange.body = pending_.substr(0, content_length);
    pending_.erase(0, content_length);
    return true;
  }

  void Send(int code, absl::string_view body) override {
    Write(absl::StrCat("HTTP/1.1 ", code, " ", Reason(code),
                       "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                       "\r\n\r\n", body));
    answered_ = true;
  }
  void StartChunked(int code) override {
    Write(absl::StrCat("HTTP/1.1 ", code, " ", Reason(code),
                       "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"));
  }
  void Chunk(absl::string_view data) override {
    if (data.empty()) return;  // an empty chunk would end the body
    Write(absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n"));
  }
  void EndChunked() override {
    Write("0\r\n\r\n");
    answered_ = true;
  }
  void Drop() override {
    ::shutdown(fd_, SHUT_RDWR);
    broken_ = true;
  }
  bool WaitForClientClose(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!broken_ && !stopping_ && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0 && !ReadMore()) {
        broken_ = true;
        return true;
      }
    }
    return broken_;
  }

 private:
  bool ReadMore() {
    char buffer[16384];
    const int n = ssl_ != nullptr ? SSL_read(ssl_, buffer, sizeof(buffer))
                                  : static_cast<int>(::recv(fd_, buffer, sizeof(buffer), 0));
    if (n <= 0) return false;
    pending_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  void Write(absl::string_view data) {
    while (!broken_ && !data.empty()) {
      const int n = ssl_ != nullptr
                        ? SSL_write(ssl_, data.data(), static_cast<int>(data.size()))
                        : static_cast<int>(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL));
      if (n <= 0) {
        broken_ = true;
        return;
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  const int fd_;
  SSL* const ssl_;
  const std::atomic<bool>& stopping_;
  std::string pending_;  // bytes read, not yet parsed
  bool broken_ = false;
  bool answered_ = false;
};

absl::StatusOr<std::unique_ptr<ScriptedHttpServer>> ScriptedHttpServer::Start(Handler handler,
                                                                              const Tls* tls) {
  SSL_CTX* ctx = nullptr;
  if (tls != nullptr) {
    // OpenSSL writes with write(2): a client that hung up would raise SIGPIPE. (Plain
    // connections send with MSG_NOSIGNAL.)
    std::signal(SIGPIPE, SIG_IGN);
    ctx = SSL_CTX_new(TLS_server_method());
    bool ok = ctx != nullptr &&
              SSL_CTX_use_certificate_chain_file(ctx, tls->cert_file.c_str()) == 1 &&
              SSL_CTX_use_PrivateKey_file(ctx, tls->key_file.c_str(), SSL_FILETYPE_PEM) == 1;
    if (ok && !tls->client_ca_file.empty()) {
      ok = SSL_CTX_load_verify_locations(ctx, tls->client_ca_file.c_str(), nullptr) == 1;
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    if (!ok) {
      SSL_CTX_free(ctx);
      return absl::InternalError(
          absl::StrCat("TLS setup: ", ERR_error_string(ERR_get_error(), nullptr)));
    }
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    SSL_CTX_free(ctx);
    return absl::UnavailableError(absl::StrCat("listen on 127.0.0.1: ", error));
  }
  return std::unique_ptr<ScriptedHttpServer>(
      new ScriptedHttpServer(std::move(handler), fd, ntohs(address.sin_port), ctx));
}

ScriptedHttpServer::ScriptedHttpServer(Handler handler, int listen_fd, int port, void* ssl_ctx)
    : handler_(std::move(handler)), listen_fd_(listen_fd), port_(port), ssl_ctx_(ssl_ctx) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

ScriptedHttpServer::~ScriptedHttpServer() {
  stopping_ = true;
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (std::thread& thread : threads) thread.join();
  SSL_CTX_free(static_cast<SSL_CTX*>(ssl_ctx_));
}

std::string ScriptedHttpServer::url() const {
  return absl::StrCat(ssl_ctx_ != nullptr ? "https" : "http", "://127.0.0.1:", port_);
}

std::vector<HttpExchange> ScriptedHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

void ScriptedHttpServer::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void ScriptedHttpServer::Serve(int fd) {
  SSL* ssl = nullptr;
  bool ok = true;
  if (ssl_ctx_ != nullptr) {
    ssl = SSL_new(static_cast<SSL_CTX*>(ssl_ctx_));
    SSL_set_fd(ssl, fd);
    ok = SSL_accept(ssl) == 1;
  }
  {
    Connection connection(fd, ssl, stopping_);
    while (ok && !stopping_) {
      HttpExchange exchange;
      if (!connection.ReadRequest(exchange)) break;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.push_back(exchange);
      }
      connection.NewRequest();
      handler_(exchange, connection);
      if (connection.broken() || !connection.answered()) break;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  open_fds_.erase(std::find(open_fds_.begin(), open_fds_.end(), fd));
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

}  // namespace psflow::kube
