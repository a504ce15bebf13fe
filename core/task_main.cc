#include "core/task_main.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "core/command_line.h"
#include "core/memory_tuning.h"
#include "core/task_flags.h"

namespace psflow {

int RunTaskMain(int argc, char** argv, const char* program, const char* usage,
                absl::Status (*task)(const TransportSecurity& security),
                absl::StatusOr<std::string> (*check)()) {
  KeepFreedMemoryForReuse();
  ParseFlags(argc, argv, usage);
  if (absl::GetFlag(FLAGS_check_config)) {
    const absl::Status tls = TlsFilesGiven().status();
    const absl::StatusOr<std::string> summary =
        tls.ok() ? check() : absl::StatusOr<std::string>(tls);
    if (!summary.ok()) {
      std::fprintf(stderr, "%s: %s\n", program, std::string(summary.status().message()).c_str());
      return 1;
    }
    std::printf("%s: %s\n", program, summary->c_str());
    return 0;
  }
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
