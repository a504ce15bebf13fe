// The main() of psflow-ps and psflow-worker: malloc settings for bulk transfers, flags
// (ParseFlags: `usage` heads --help), the transport security the TLS flags ask for (checked
// before the task starts: a bad or missing file ends in one line "<program>: <message>" on stderr
// and exit code 2), then the task; its error ends in one line "<program>: <message>" and exit
// code 1.
//
// With --check_config the task does not start: the TLS flags are checked as a set (TlsFilesGiven),
// and `check` resolves the flags and the cluster spec as the task would at its start, without
// reading the files they name (TLS, data, checkpoints, model exports: they are the pod's; a
// worker's --model_file is read) and without opening a port. Its summary is printed as one
// line "<program>: <summary>" on stdout, exit code 0; its error as one line "<program>: <message>"
// on stderr, exit code 1. `psflow validate` and `psflow run` run it for each replica.
#ifndef PSFLOW_CORE_TASK_MAIN_H_
#define PSFLOW_CORE_TASK_MAIN_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/transport_security.h"

namespace psflow {

int RunTaskMain(int argc, char** argv, const char* program, const char* usage,
                absl::Status (*task)(const TransportSecurity& security),
                absl::StatusOr<std::string> (*check)());

}  // namespace psflow

#endif  // PSFLOW_CORE_TASK_MAIN_H_
