// A raw-socket HTTP/1.1 client for the test API server's tests: requests exactly as written,
// responses read byte by byte (Content-Length or chunked), watch streams line by line. Blocking,
// one connection, every read bounded by a timeout.
#ifndef PSFLOW_TESTS_KUBE_HTTP_TEST_CLIENT_H_
#define PSFLOW_TESTS_KUBE_HTTP_TEST_CLIENT_H_

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::kubetest {

struct HttpResponse {
  int code = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // de-chunked

  // The body as JSON (discarded when it is not JSON).
  nlohmann::json Json() const;
};

class HttpTestClient {
 public:
  // UNAVAILABLE when nothing listens on 127.0.0.1:<port>.
  static absl::StatusOr<std::unique_ptr<HttpTestClient>> Connect(int port);
  ~HttpTestClient();
  HttpTestClient(const HttpTestClient&) = delete;
  HttpTestClient& operator=(const HttpTestClient&) = delete;

  // Sends these bytes as they are.
  absl::Status SendRaw(absl::string_view bytes);
  // Sends `method target HTTP/1.1` with Host, the headers given (as "Name: value" lines in
  // `headers`, each ending in \r\n) and a body with its Content-Length (none when the body is
  // empty and the method is GET).
  absl::Status Send(absl::string_view method, absl::string_view target, absl::string_view body = "",
                    absl::string_view headers = "");

  // One whole response.
  absl::StatusOr<HttpResponse> ReadResponse(
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The status line and headers of a response whose body is read next with ReadLine.
  absl::StatusOr<HttpResponse> ReadHead(
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The next line of a chunked body, without its '\n'. OUT_OF_RANGE at the body's end (the
  // last chunk), DEADLINE_EXCEEDED when `timeout` passes, UNAVAILABLE when the connection closes.
  absl::StatusOr<std::string> ReadLine(
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Whether the server closes the connection within `timeout` (reads return end of stream).
  bool ClosedByServer(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  explicit HttpTestClient(int fd) : fd_(fd) {}
  // Reads more bytes into buffer_ (UNAVAILABLE at end of stream, DEADLINE_EXCEEDED on timeout).
  absl::Status Fill(std::chrono::steady_clock::time_point deadline);
  absl::StatusOr<std::string> ReadUntil(absl::string_view delimiter,
                                        std::chrono::steady_clock::time_point deadline);
  absl::StatusOr<std::string> ReadBytes(size_t n, std::chrono::steady_clock::time_point deadline);
  // The next chunk of a chunked body; "" for the last one.
  absl::StatusOr<std::string> ReadChunk(std::chrono::steady_clock::time_point deadline);

  int fd_;
  std::string buffer_;        // received, not consumed
  std::string pending_line_;  // chunked body data not yet ending in '\n'
  bool body_ended_ = false;
};

// One request on a new connection ("Connection: close"), for tests that need one answer.
absl::StatusOr<HttpResponse> HttpRequestOnce(int port, absl::string_view method,
                                             absl::string_view target, absl::string_view body = "",
                                             absl::string_view headers = "");

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_HTTP_TEST_CLIENT_H_
