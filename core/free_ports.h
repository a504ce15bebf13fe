// Free TCP ports on 127.0.0.1, for local runs, tests and benchmarks.
#ifndef PSFLOW_CORE_FREE_PORTS_H_
#define PSFLOW_CORE_FREE_PORTS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace psflow {

// `count` distinct ports: every socket stays bound until all are chosen, so none is handed out
// twice. Another program may still take one before its user binds it. UNAVAILABLE when the
// kernel has none to give.
absl::StatusOr<std::vector<int>> FreeLocalPorts(int count);

}  // namespace psflow

#endif  // PSFLOW_CORE_FREE_PORTS_H_
