// The main() of psflow-ps and psflow-worker: malloc settings for bulk transfers, flags
// (ParseFlags: `usage` heads --help), then the task; an error ends in one line
// "<program>: <message>" on stderr and exit code 1.
#ifndef PSFLOW_CORE_TASK_MAIN_H_
#define PSFLOW_CORE_TASK_MAIN_H_

#include "absl/status/status.h"

namespace psflow {

int RunTaskMain(int argc, char** argv, const char* program, const char* usage,
                absl::Status (*task)());

}  // namespace psflow

#endif  // PSFLOW_CORE_TASK_MAIN_H_
