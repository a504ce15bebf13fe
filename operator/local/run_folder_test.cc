#include "operator/local/run_folder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psflow::local {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

class RunFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("run_folder_test_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(RunFolderTest, AGivenFolderIsCreatedWithItsParentsAndMayExist) {
  const std::string wanted = (dir_ / "a" / "b").string();
  auto made = CreateRunFolder(wanted, "job", absl::Now());
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(*made, wanted);
  EXPECT_TRUE(fs::is_directory(wanted));
  EXPECT_TRUE(CreateRunFolder(wanted, "job", absl::Now()).ok());
}

TEST_F(RunFolderTest, TheDefaultIsNamedForTheJobAndTimeAndNeverReused) {
  const fs::path before = fs::current_path();
  fs::current_path(dir_);
  const absl::Time now =
      absl::FromCivil(absl::CivilSecond(2025, 3, 4, 5, 6, 7), absl::LocalTimeZone());
  auto first = CreateRunFolder("", "mnist", now);
  auto second = CreateRunFolder("", "mnist", now);
  fs::current_path(before);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, "psflow-runs/mnist-20250304-050607");
  EXPECT_EQ(*second, "psflow-runs/mnist-20250304-050607-2");
  EXPECT_TRUE(fs::is_directory(dir_ / *second));
}

TEST_F(RunFolderTest, AFolderThatCannotBeMadeIsOneClearError) {
  const std::string file = (dir_ / "file").string();
  std::ofstream(file) << "x";
  auto made = CreateRunFolder(file + "/runs", "job", absl::Now());
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(made.status().message(), file + "/runs cannot be written"))
      << made.status();
  EXPECT_FALSE(absl::StrContains(made.status().message(), "\n"));
}

TEST_F(RunFolderTest, ReplicaLogWritesEveryLineAndKeepsTheLastTwenty) {
  auto log = ReplicaLog::Open((dir_ / "worker-0.log").string());
  ASSERT_TRUE(log.ok()) << log.status();
  std::string expected;
  for (int i = 0; i < 25; ++i) {
    (*log)->Append(absl::StrCat("line ", i));
    absl::StrAppend(&expected, "line ", i, "\n");
  }
  EXPECT_EQ(Read((dir_ / "worker-0.log").string()), expected);
  const std::vector<std::string> tail = (*log)->Tail();
  ASSERT_EQ(tail.size(), ReplicaLog::kTailLines);
  EXPECT_EQ(tail.front(), "line 5");
  EXPECT_EQ(tail.back(), "line 24");
  // A restart: the marker is in the file, and the tail holds the new run's lines only.
  (*log)->StartRun("[psflow] worker-0 restarted (restart 1)");
  (*log)->Append("again");
  EXPECT_EQ(Read((dir_ / "worker-0.log").string()),
            expected + "[psflow] worker-0 restarted (restart 1)\nagain\n");
  EXPECT_EQ((*log)->Tail(), std::vector<std::string>{"again"});
}

TEST_F(RunFolderTest, ReplicaLogInAMissingFolderIsAnError) {
  auto log = ReplicaLog::Open((dir_ / "missing" / "ps-0.log").string());
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(log.status().message(), "ps-0.log")) << log.status();
}

// A full disk (/dev/full: every write fails with ENOSPC) loses the lines but not the run: each
// is counted, the first error kept for the runner to say once, and the tail still has them for
// the failure report.
TEST_F(RunFolderTest, ReplicaLogOnAFullDiskCountsWhatItLostAndSaysWhy) {
  auto log = ReplicaLog::Open("/dev/full");
  ASSERT_TRUE(log.ok()) << log.status();
  (*log)->Append("step 1");
  (*log)->Append("step 2");
  EXPECT_EQ((*log)->lines_lost(), 2);
  EXPECT_EQ((*log)->write_error(), "/dev/full: No space left on device");
  EXPECT_EQ((*log)->Tail(), (std::vector<std::string>{"step 1", "step 2"}));
}

}  // namespace
}  // namespace psflow::local
