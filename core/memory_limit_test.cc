#include "core/memory_limit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace psflow {
namespace {

TEST(MemoryLimit, ParsesCgroupFilesAndTakesHugeOrMaxAsNone) {
  EXPECT_EQ(ParseCgroupMemoryLimit("536870912\n"), 536870912);
  EXPECT_EQ(ParseCgroupMemoryLimit(" 4096 "), 4096);
  EXPECT_EQ(ParseCgroupMemoryLimit("max\n"), std::nullopt);
  // cgroup v1's "unlimited": 2^63 - 1 rounded down to a page.
  EXPECT_EQ(ParseCgroupMemoryLimit("9223372036854771712"), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit(""), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit("12abc"), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit("0"), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit("-5"), std::nullopt);
}

// A fake cgroup root: v2's memory.max wins over v1's file; without either, physical memory.
TEST(MemoryLimit, TheCgroupLimitWhenBelowPhysicalMemory) {
  const std::filesystem::path root =
      std::filesystem::path(::testing::TempDir()) / ("psflow_cgroup_" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "memory");
  const MemoryLimit physical = ProcessMemoryLimit(root.string());
  EXPECT_EQ(physical.source, "the machine's physical memory");
  EXPECT_GT(physical.bytes, 0);

  std::ofstream(root / "memory" / "memory.limit_in_bytes") << "1048576\n";
  const MemoryLimit v1 = ProcessMemoryLimit(root.string());
  EXPECT_EQ(v1.bytes, 1048576);
  EXPECT_EQ(v1.source, "the cgroup's memory.limit_in_bytes");

  std::ofstream(root / "memory.max") << "max\n";
  const MemoryLimit unlimited_v2 = ProcessMemoryLimit(root.string());
  EXPECT_EQ(unlimited_v2.bytes, physical.bytes);  // v2 says none: v1's file is not this hierarchy

  std::ofstream(root / "memory.max") << "2097152\n";
  const MemoryLimit v2 = ProcessMemoryLimit(root.string());
  EXPECT_EQ(v2.bytes, 2097152);
  EXPECT_EQ(v2.source, "the cgroup's memory.max");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace psflow
