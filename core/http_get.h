// A blocking HTTP/1.0 GET over loopback TCP, for scraping /metrics and /healthz (the local
// runner's progress line, tests). Not a general HTTP client: no TLS, no redirects, no chunking.
#ifndef PSFLOW_CORE_HTTP_GET_H_
#define PSFLOW_CORE_HTTP_GET_H_

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

// What HttpGet sends as its User-Agent: the metrics endpoint tells psflow's own scrapes (`psflow
// run`'s progress line, the operator's throughput probe) from a monitoring system's by it.
inline constexpr absl::string_view kPsflowUserAgent = "psflow";

// Returns the body of a 200 response. `timeout` bounds the whole request (connect, send,
// receive). INVALID_ARGUMENT when host is not an IPv4 address ("localhost" is taken as
// 127.0.0.1); UNAVAILABLE when the connection fails; DEADLINE_EXCEEDED when the timeout passes;
// INTERNAL for a non-200 status, a malformed response or one over 16 MiB.
// `user_agent` is sent as the User-Agent (tests play a monitoring system's scrapes with it).
absl::StatusOr<std::string> HttpGet(absl::string_view host, int port, absl::string_view path,
                                    std::chrono::milliseconds timeout,
                                    absl::string_view user_agent = kPsflowUserAgent);

}  // namespace psflow

#endif  // PSFLOW_CORE_HTTP_GET_H_
