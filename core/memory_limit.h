// How much memory this process may use: what a ps checks a model against before allocating it,
// so that a model too big for its pod ends in one RESOURCE_EXHAUSTED line instead of an OOM kill.
#ifndef PSFLOW_CORE_MEMORY_LIMIT_H_
#define PSFLOW_CORE_MEMORY_LIMIT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace psflow {

// A cgroup memory limit file's contents (v2 memory.max, v1 memory.limit_in_bytes): the limit in
// bytes, or nullopt for none ("max", v1's page-rounded 2^63 - 1 and anything from 2^60 up) and for
// text that is not a number.
std::optional<int64_t> ParseCgroupMemoryLimit(absl::string_view text);

struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;  // "the cgroup's memory.max" / "memory.limit_in_bytes" / "physical memory"
};

// The smallest of this process's cgroup limit (v2 at <cgroup_root>/memory.max, else v1 at
// <cgroup_root>/memory/memory.limit_in_bytes) and the machine's physical memory.
MemoryLimit ProcessMemoryLimit(const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace psflow

#endif  // PSFLOW_CORE_MEMORY_LIMIT_H_
