#include "core/task_main.h"

#include <cstdio>
#include <string>

#include "core/command_line.h"
#include "core/memory_tuning.h"
#include "core/task_flags.h"

namespace psflow {

int RunTaskMain(int argc, char** argv, const char* program, const char* usage,
                absl::Status (*task)(const TransportSecurity& security)) {
  KeepFreedMemoryForReuse();
  ParseFlags(argc, argv, usage);
  const absl::StatusOr<TransportSecurity> security = ResolveTransportSecurity();
  if (!security.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, std::string(security.status().message()).c_str());
    return 2;
  }
  const absl::Status s = task(*security);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace psflow
