#include "core/file_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace psflow {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/file_util_test.XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST(ParentDir, NamesTheFolderHoldingAPath) {
  EXPECT_EQ(ParentDir("a/b/c"), "a/b");
  EXPECT_EQ(ParentDir("a/b/c/"), "a/b");
  EXPECT_EQ(ParentDir("/file"), "/");
  EXPECT_EQ(ParentDir("file"), ".");
  EXPECT_EQ(ParentDir("/"), "/");
}

TEST_F(FileUtilTest, MakeDirsCreatesEveryMissingFolderAndAcceptsExistingOnes) {
  const std::string deep = dir_ + "/a/b/c";
  ASSERT_TRUE(MakeDirs(deep).ok());
  struct stat st {};
  ASSERT_EQ(::stat(deep.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_TRUE(MakeDirs(deep).ok());
  EXPECT_TRUE(MakeDirs(dir_ + "/a").ok());
}

TEST_F(FileUtilTest, MakeDirsRefusesAFileInTheWay) {
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "x";
  const absl::Status at_file = MakeDirs(file);
  EXPECT_EQ(at_file.code(), absl::StatusCode::kFailedPrecondition) << at_file;
  EXPECT_NE(at_file.message().find("mkdir " + file), std::string::npos) << at_file;
  EXPECT_EQ(MakeDirs(file + "/below").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(FileUtilTest, DirNamesListsEntriesAndSaysNotFound) {
  std::ofstream(dir_ + "/one") << "1";
  ASSERT_TRUE(MakeDirs(dir_ + "/two").ok());
  absl::StatusOr<std::vector<std::string>> names = DirNames(dir_);
  ASSERT_TRUE(names.ok()) << names.status();
  std::sort(names->begin(), names->end());
  EXPECT_EQ(*names, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(DirNames(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(FileUtilTest, TempFileGuardRemovesTheFileUnlessReleased) {
  const std::string removed = dir_ + "/removed.tmp";
  const std::string kept = dir_ + "/kept.tmp";
  std::ofstream(removed) << "x";
  std::ofstream(kept) << "x";
  {
    TempFileGuard a(removed);
    TempFileGuard b(kept);
    b.Release();
  }
  EXPECT_FALSE(Exists(removed));
  EXPECT_TRUE(Exists(kept));
  { TempFileGuard gone(dir_ + "/never-created"); }  // a missing file is no warning
}

TEST_F(FileUtilTest, FdClosesOnceAndReportsTheFileInErrors) {
  const std::string path = dir_ + "/f";
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid());
  EXPECT_TRUE(FsyncFd(fd.get(), path).ok());
  EXPECT_TRUE(fd.Close(path).ok());
  EXPECT_FALSE(fd.valid());
  EXPECT_TRUE(FsyncDir(dir_).ok());
  const absl::Status missing = FsyncDir(dir_ + "/missing");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("open folder " + dir_ + "/missing"), std::string::npos);
}

}  // namespace
}  // namespace psflow
