// The server side of one HTTP/1.1 connection over a connected socket: requests in (with
// Content-Length or chunked bodies, Expect: 100-continue, keep-alive), responses out (with a
// Content-Length, or streamed in chunks). What the test API server needs, no more: no TLS, no
// upgrades, no trailers.
#ifndef PSFLOW_TESTS_KUBE_HTTP_CONNECTION_H_
#define PSFLOW_TESTS_KUBE_HTTP_CONNECTION_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::kubetest {

struct HttpRequest {
  std::string method;  // "GET"
  std::string path;    // percent-decoded, without the query: "/api/v1/namespaces/default/pods"
  std::map<std::string, std::string> query;    // percent- and '+'-decoded; the last value wins
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 without "Connection: close", or 1.0 with keep-alive

  // The header's value, or "" when absent.
  std::string Header(const std::string& lower_case_name) const;
};

// Percent-decoding of a URL part; `plus_is_space` for query strings. INVALID_ARGUMENT for a bad
// escape.
absl::StatusOr<std::string> UrlDecode(absl::string_view text, bool plus_is_space);

// Not thread-safe, except PeerClosed; one thread serves a connection. Does not own the socket.
class HttpConnection {
 public:
  explicit HttpConnection(int fd) : fd_(fd) {}

  // The next request on the connection. OUT_OF_RANGE when the peer closed it (or it was shut
  // down) between requests; INVALID_ARGUMENT for a malformed request, RESOURCE_EXHAUSTED for one
  // over the size limits (the caller answers 400/413 and closes); UNAVAILABLE for socket errors.
  absl::StatusOr<HttpRequest> ReadRequest();

  // A whole response with a Content-Length.
  absl::Status WriteResponse(int code, absl::string_view content_type, absl::string_view body,
                             bool keep_alive);
  // A response whose body follows in chunks (Transfer-Encoding: chunked).
  absl::Status StartChunked(int code, absl::string_view content_type);
  absl::Status WriteChunk(absl::string_view data);
  absl::Status EndChunked();

  // Whether the peer has closed its side (polls without blocking). Bytes it sent are kept.
  bool PeerClosed();

 private:
  // Reads more bytes into buffer_; OUT_OF_RANGE at end of stream.
  absl::Status Fill();
  absl::Status WriteAll(absl::string_view data);
  absl::StatusOr<std::string> ReadChunkedBody();

  const int fd_;
  std::string buffer_;  // received, not yet consumed
};

// "OK", "Not Found", ...: the reason phrase of an HTTP status code.
absl::string_view ReasonPhrase(int code);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_HTTP_CONNECTION_H_
