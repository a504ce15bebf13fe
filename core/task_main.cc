#include "core/task_main.h"

#include <cstdio>
#include <string>

#include "core/command_line.h"
#include "core/memory_tuning.h"

namespace psflow {

int RunTaskMain(int argc, char** argv, const char* program, const char* usage,
                absl::Status (*task)()) {
  KeepFreedMemoryForReuse();
  ParseFlags(argc, argv, usage);
  const absl::Status s = task();
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace psflow
