// Free TCP ports on 127.0.0.1, for local runs, tests and benchmarks.
#ifndef PSFLOW_CORE_FREE_PORTS_H_
#define PSFLOW_CORE_FREE_PORTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow {

// `count` distinct ports: every socket stays bound until all are chosen, so none is handed out
// twice. Another program may still take one before its user binds it. UNAVAILABLE when the
// kernel has none to give.
absl::StatusOr<std::vector<int>> FreeLocalPorts(int count);

// OK when a TCP listener could bind ipv4_address:port right now (the caller binds it next), else
// UNAVAILABLE with the reason ("Address already in use"). Lets a server fail with one clean line
// before a library prints its own multi-line error.
absl::Status CheckCanListen(const std::string& ipv4_address, int port);

}  // namespace psflow

#endif  // PSFLOW_CORE_FREE_PORTS_H_
