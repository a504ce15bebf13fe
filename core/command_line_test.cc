#include "core/command_line.h"

#include <gtest/gtest.h>

namespace psflow {
namespace {

TEST(RepositoryPath, NamesPsflowFilesFromTheRepositoryRoot) {
  EXPECT_EQ(RepositoryPath(__FILE__), "core/command_line_test.cc");
}

TEST(RepositoryPath, LeavesOtherFilesWithoutALeadingSlashOrDot) {
  EXPECT_EQ(RepositoryPath("./absl/flags/parse.cc"), "absl/flags/parse.cc");
  EXPECT_EQ(RepositoryPath("/usr/include/absl/flags/flag.h"), "usr/include/absl/flags/flag.h");
}

}  // namespace
}  // namespace psflow
