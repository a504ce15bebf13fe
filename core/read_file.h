// Reading a whole small file (a kubeconfig, a PEM, a token) into memory.
#ifndef PSFLOW_CORE_READ_FILE_H_
#define PSFLOW_CORE_READ_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace psflow {

// The file's bytes. Errors say "cannot read <path>: <reason>": NOT_FOUND when it does not exist,
// PERMISSION_DENIED when it may not be read, FAILED_PRECONDITION otherwise (a directory, an I/O
// error, over 16 MiB).
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace psflow

#endif  // PSFLOW_CORE_READ_FILE_H_
