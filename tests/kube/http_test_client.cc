#include "tests/kube/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"

namespace psflow::kubetest {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

nlohmann::json HttpResponse::Json() const {
  return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
}

absl::StatusOr<std::unique_ptr<HttpTestClient>> HttpTestClient::Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("connect 127.0.0.1:", port, ": ", why));
  }
  return std::unique_ptr<HttpTestClient>(new HttpTestClient(fd));
}

HttpTestClient::~HttpTestClient() { ::close(fd_); }

absl::Status HttpTestClient::SendRaw(absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status HttpTestClient::Send(absl::string_view method, absl::string_view target,
                                  absl::string_view body, absl::string_view headers) {
  std::string request =
      absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n", headers);
  if (!body.empty() || method != "GET") {
    absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  return SendRaw(request);
}

absl::Status HttpTestClient::Fill(Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return absl::DeadlineExceededError("timed out reading the response");
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char chunk[16384];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return absl::OkStatus();
    }
    if (n < 0 && errno == EINTR) continue;
    return absl::UnavailableError(n == 0 ? "connection closed by the server"
                                         : absl::StrCat("recv: ", std::strerror(errno)));
  }
}

absl::StatusOr<std::string> HttpTestClient::ReadUntil(absl::string_view delimiter,
                                                      Clock::time_point deadline) {
  size_t at;
  while ((at = buffer_.find(delimiter.data(), 0, delimiter.size())) == std::string::npos)
    RETURN_IF_ERROR(Fill(deadline));
  std::string out = buffer_.substr(0, at);
  buffer_.erase(0, at + delimiter.size());
  return out;
}

absl::StatusOr<std::string> HttpTestClient::ReadBytes(size_t n, Clock::time_point deadline) {
  while (buffer_.size() < n) RETURN_IF_ERROR(Fill(deadline));
  std::string out = buffer_.substr(0, n);
  buffer_.erase(0, n);
  return out;
}

absl::StatusOr<HttpResponse> HttpTestClient::ReadHead(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  HttpResponse response;
  for (;;) {
    ASSIGN_OR_RETURN(const std::string head, ReadUntil("\r\n\r\n", deadline));
    std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
    std::vector<std::string> status = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
    if (status.size() < 2 || !absl::SimpleAtoi(status[1], &response.code)) {
      return absl::InternalError(absl::StrCat("bad status line \"", lines[0], "\""));
    }
    response.headers.clear();
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) return absl::InternalError("bad header line");
      response.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    if (response.code != 100) break;  // an interim answer: the real one follows
  }
  pending_line_.clear();
  body_ended_ = false;
  return response;
}

absl::StatusOr<std::string> HttpTestClient::ReadChunk(Clock::time_point deadline) {
  ASSIGN_OR_RETURN(const std::string size_line, ReadUntil("\r\n", deadline));
  size_t size = 0;
  if (!absl::SimpleHexAtoi(size_line, &size)) {
    return absl::InternalError(absl::StrCat("bad chunk size \"", size_line, "\""));
  }
  if (size == 0) {
    // The last chunk: trailer lines follow, up to an empty one.
    for (;;) {
      ASSIGN_OR_RETURN(const std::string trailer, ReadUntil("\r\n", deadline));
      if (trailer.empty()) return std::string();
    }
  }
  ASSIGN_OR_RETURN(std::string data, ReadBytes(size, deadline));
  ASSIGN_OR_RETURN(const std::string crlf, ReadBytes(2, deadline));
  if (crlf != "\r\n") return absl::InternalError("chunk not followed by CRLF");
  return data;
}

absl::StatusOr<HttpResponse> HttpTestClient::ReadResponse(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  ASSIGN_OR_RETURN(HttpResponse response, ReadHead(timeout));
  if (absl::StrContains(response.headers["transfer-encoding"], "chunked")) {
    for (;;) {
      ASSIGN_OR_RETURN(std::string chunk, ReadChunk(deadline));
      if (chunk.empty()) break;
      response.body += chunk;
    }
    return response;
  }
  size_t length = 0;
  if (!absl::SimpleAtoi(response.headers["content-length"], &length)) {
    return absl::InternalError("response without Content-Length");
  }
  ASSIGN_OR_RETURN(response.body, ReadBytes(length, deadline));
  return response;
}

absl::StatusOr<std::string> HttpTestClient::ReadLine(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    if (const size_t eol = pending_line_.find('\n'); eol != std::string::npos) {
      std::string line = pending_line_.substr(0, eol);
      pending_line_.erase(0, eol + 1);
      return line;
    }
    if (body_ended_) return absl::OutOfRangeError("end of the chunked body");
    ASSIGN_OR_RETURN(std::string chunk, ReadChunk(deadline));
    if (chunk.empty()) {
      body_ended_ = true;
      continue;
    }
    pending_line_ += chunk;
  }
}

bool HttpTestClient::ClosedByServer(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    absl::Status s = Fill(deadline);
    if (absl::IsUnavailable(s)) return true;
    if (!s.ok()) return false;
  }
}

absl::StatusOr<HttpResponse> HttpRequestOnce(int port, absl::string_view method,
                                             absl::string_view target, absl::string_view body,
                                             absl::string_view headers) {
  ASSIGN_OR_RETURN(std::unique_ptr<HttpTestClient> client, HttpTestClient::Connect(port));
  RETURN_IF_ERROR(
      client->Send(method, target, body, absl::StrCat("Connection: close\r\n", headers)));
  return client->ReadResponse();
}

}  // namespace psflow::kubetest
