#include "core/memory_limit.h"

#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "core/read_file.h"

namespace psflow {

std::optional<int64_t> ParseCgroupMemoryLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  int64_t bytes = 0;
  if (text == "max" || !absl::SimpleAtoi(text, &bytes) || bytes <= 0 ||
      bytes >= (int64_t{1} << 60)) {
    return std::nullopt;
  }
  return bytes;
}

MemoryLimit ProcessMemoryLimit(const std::string& cgroup_root) {
  MemoryLimit limit;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  limit.bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{1} << 60;
  limit.source = "the machine's physical memory";
  const struct {
    std::string path;
    const char* name;
  } files[] = {
      {cgroup_root + "/memory.max", "the cgroup's memory.max"},
      {cgroup_root + "/memory/memory.limit_in_bytes", "the cgroup's memory.limit_in_bytes"}};
  for (const auto& f : files) {
    absl::StatusOr<std::string> text = ReadFile(f.path);
    if (!text.ok()) continue;
    if (std::optional<int64_t> bytes = ParseCgroupMemoryLimit(*text);
        bytes.has_value() && *bytes < limit.bytes) {
      limit.bytes = *bytes;
      limit.source = f.name;
    }
    break;  // the first file that exists is this process's hierarchy
  }
  return limit;
}

}  // namespace psflow
