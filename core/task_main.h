// The main() of psflow-ps and psflow-worker: malloc settings for bulk transfers, flags
// (ParseFlags: `usage` heads --help), the transport security the TLS flags ask for (checked
// before the task starts: a bad or missing file ends in one line "<program>: <message>" on stderr
// and exit code 2), then the task; its error ends in one line "<program>: <message>" and exit
// code 1.
#ifndef PSFLOW_CORE_TASK_MAIN_H_
#define PSFLOW_CORE_TASK_MAIN_H_

#include "absl/status/status.h"
#include "core/transport_security.h"

namespace psflow {

int RunTaskMain(int argc, char** argv, const char* program, const char* usage,
                absl::Status (*task)(const TransportSecurity& security));

}  // namespace psflow

#endif  // PSFLOW_CORE_TASK_MAIN_H_
