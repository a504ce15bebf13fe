// A blocking HTTP/1.0 GET over loopback TCP, for scraping /metrics and /healthz (the local
// runner's progress line, tests). Not a general HTTP client: no TLS, no redirects, no chunking.
#ifndef PSFLOW_CORE_HTTP_GET_H_
#define PSFLOW_CORE_HTTP_GET_H_

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

// Returns the body of a 200 response. `timeout` bounds the whole request (connect, send,
// receive). INVALID_ARGUMENT when host is not an IPv4 address ("localhost" is taken as
// 127.0.0.1); UNAVAILABLE when the connection fails; DEADLINE_EXCEEDED when the timeout passes;
// INTERNAL for a non-200 status, a malformed response or one over 16 MiB.
absl::StatusOr<std::string> HttpGet(absl::string_view host, int port, absl::string_view path,
                                    std::chrono::milliseconds timeout);

}  // namespace psflow

#endif  // PSFLOW_CORE_HTTP_GET_H_
