#include "tests/kube/http_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"

namespace psflow::kubetest {
namespace {

constexpr size_t kMaxHeaderBytes = size_t{64} << 10;
constexpr size_t kMaxBodyBytes = size_t{16} << 20;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HttpRequest::Header(const std::string& lower_case_name) const {
  auto it = headers.find(lower_case_name);
  return it == headers.end() ? std::string() : it->second;
}

absl::StatusOr<std::string> UrlDecode(absl::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (c != '%') {
      out.push_back(c);
    } else {
      const int h = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
      const int l = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
      if (h < 0 || l < 0) {
        return absl::InvalidArgumentError(absl::StrCat("bad percent-escape in \"", text, "\""));
      }
      out.push_back(static_cast<char>(h * 16 + l));
      i += 2;
    }
  }
  return out;
}

absl::Status HttpConnection::Fill() {
  char chunk[16384];
  for (;;) {
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return absl::OkStatus();
    }
    if (n == 0) return absl::OutOfRangeError("connection closed by the peer");
    if (errno == EINTR) continue;
    return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
  }
}

absl::StatusOr<HttpRequest> HttpConnection::ReadRequest() {
  // Empty lines before a request are allowed (RFC 9112 section 2.2).
  size_t end;
  for (;;) {
    while (absl::StartsWith(buffer_, "\r\n")) buffer_.erase(0, 2);
    end = buffer_.find("\r\n\r\n");
    if (end != std::string::npos) break;
    if (buffer_.size() > kMaxHeaderBytes) {
      return absl::ResourceExhaustedError("request headers over 64 KiB");
    }
    absl::Status filled = Fill();
    if (absl::IsOutOfRange(filled) && !buffer_.empty()) {
      return absl::InvalidArgumentError("connection closed in the middle of a request");
    }
    RETURN_IF_ERROR(filled);
  }
  const std::string head = buffer_.substr(0, end);
  buffer_.erase(0, end + 4);

  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  std::vector<absl::string_view> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3 || first[0].empty() || !absl::StartsWith(first[2], "HTTP/1.")) {
    return absl::InvalidArgumentError(absl::StrCat("bad request line \"", lines[0], "\""));
  }
  HttpRequest request;
  request.method = std::string(first[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad header line \"", lines[i], "\""));
    }
    std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
    std::string& slot = request.headers[name];
    slot = slot.empty() ? std::string(value) : absl::StrCat(slot, ",", value);
  }
  const std::string connection = absl::AsciiStrToLower(request.Header("connection"));
  request.keep_alive = first[2] == "HTTP/1.0" ? absl::StrContains(connection, "keep-alive")
                                              : !absl::StrContains(connection, "close");

  const absl::string_view target = first[1];
  const size_t question = target.find('?');
  ASSIGN_OR_RETURN(request.path, UrlDecode(target.substr(0, question), false));
  if (question != absl::string_view::npos) {
    for (absl::string_view pair :
         absl::StrSplit(target.substr(question + 1), '&', absl::SkipEmpty())) {
      const size_t eq = pair.find('=');
      ASSIGN_OR_RETURN(std::string key, UrlDecode(pair.substr(0, eq), true));
      std::string value;
      if (eq != absl::string_view::npos) {
        ASSIGN_OR_RETURN(value, UrlDecode(pair.substr(eq + 1), true));
      }
      request.query[std::move(key)] = std::move(value);
    }
  }

  const bool chunked =
      absl::StrContains(absl::AsciiStrToLower(request.Header("transfer-encoding")), "chunked");
  size_t length = 0;
  if (!chunked && !request.Header("content-length").empty() &&
      !absl::SimpleAtoi(request.Header("content-length"), &length)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad Content-Length \"", request.Header("content-length"), "\""));
  }
  if (length > kMaxBodyBytes) return absl::ResourceExhaustedError("request body over 16 MiB");
  if ((chunked || length > 0) && absl::EqualsIgnoreCase(request.Header("expect"), "100-continue")) {
    RETURN_IF_ERROR(WriteAll("HTTP/1.1 100 Continue\r\n\r\n"));
  }
  if (chunked) {
    ASSIGN_OR_RETURN(request.body, ReadChunkedBody());
    return request;
  }
  while (buffer_.size() < length) {
    absl::Status filled = Fill();
    if (absl::IsOutOfRange(filled)) {
      return absl::InvalidArgumentError("connection closed in the middle of a request body");
    }
    RETURN_IF_ERROR(filled);
  }
  request.body = buffer_.substr(0, length);
  buffer_.erase(0, length);
  return request;
}

absl::StatusOr<std::string> HttpConnection::ReadChunkedBody() {
  std::string body;
  // Reads one CRLF-terminated line.
  auto read_line = [this]() -> absl::StatusOr<std::string> {
    size_t eol;
    while ((eol = buffer_.find("\r\n")) == std::string::npos) {
      if (buffer_.size() > kMaxHeaderBytes) {
        return absl::ResourceExhaustedError("chunk header over 64 KiB");
      }
      absl::Status filled = Fill();
      if (absl::IsOutOfRange(filled)) {
        return absl::InvalidArgumentError("connection closed in the middle of a chunked body");
      }
      RETURN_IF_ERROR(filled);
    }
    std::string line = buffer_.substr(0, eol);
    buffer_.erase(0, eol + 2);
    return line;
  };
  for (;;) {
    ASSIGN_OR_RETURN(const std::string line, read_line());
    const absl::string_view size_text =
        absl::StripAsciiWhitespace(absl::string_view(line).substr(0, line.find(';')));
    size_t size = 0;
    for (char c : size_text) {
      const int digit = HexValue(c);
      if (digit < 0 || size > kMaxBodyBytes) {
        return absl::InvalidArgumentError(absl::StrCat("bad chunk size \"", line, "\""));
      }
      size = size * 16 + static_cast<size_t>(digit);
    }
    if (size_text.empty()) return absl::InvalidArgumentError("empty chunk size");
    if (size == 0) break;
    if (body.size() + size > kMaxBodyBytes) {
      return absl::ResourceExhaustedError("request body over 16 MiB");
    }
    while (buffer_.size() < size + 2) {
      absl::Status filled = Fill();
      if (absl::IsOutOfRange(filled)) {
        return absl::InvalidArgumentError("connection closed in the middle of a chunked body");
      }
      RETURN_IF_ERROR(filled);
    }
    if (buffer_.compare(size, 2, "\r\n") != 0) {
      return absl::InvalidArgumentError("chunk not followed by CRLF");
    }
    body.append(buffer_, 0, size);
    buffer_.erase(0, size + 2);
  }
  // Trailer fields, up to an empty line: read and ignored.
  for (;;) {
    ASSIGN_OR_RETURN(const std::string trailer, read_line());
    if (trailer.empty()) break;
  }
  return body;
}

absl::Status HttpConnection::WriteAll(absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status HttpConnection::WriteResponse(int code, absl::string_view content_type,
                                           absl::string_view body, bool keep_alive) {
  return WriteAll(absl::StrCat("HTTP/1.1 ", code, " ", ReasonPhrase(code), "\r\nContent-Type: ",
                               content_type, "\r\nContent-Length: ", body.size(),
                               keep_alive ? "" : "\r\nConnection: close", "\r\n\r\n", body));
}

absl::Status HttpConnection::StartChunked(int code, absl::string_view content_type) {
  return WriteAll(absl::StrCat("HTTP/1.1 ", code, " ", ReasonPhrase(code), "\r\nContent-Type: ",
                               content_type, "\r\nTransfer-Encoding: chunked\r\n\r\n"));
}

absl::Status HttpConnection::WriteChunk(absl::string_view data) {
  if (data.empty()) return absl::OkStatus();  // an empty chunk would end the body
  return WriteAll(absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n"));
}

absl::Status HttpConnection::EndChunked() { return WriteAll("0\r\n\r\n"); }

bool HttpConnection::PeerClosed() {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) != 0) return true;
  if ((p.revents & POLLIN) == 0) return false;
  char c;
  const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

absl::string_view ReasonPhrase(int code) {
  switch (code) {
    case 100:
      return "Continue";
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
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "Payload Too Large";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

}  // namespace psflow::kubetest
