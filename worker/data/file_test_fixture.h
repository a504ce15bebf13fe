// For the data readers' tests: a scratch folder per test, and files written into it.
#ifndef PSFLOW_WORKER_DATA_FILE_TEST_FIXTURE_H_
#define PSFLOW_WORKER_DATA_FILE_TEST_FIXTURE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace psflow::data::testing {

// dir_ is <TempDir>/psflow_data_test_<pid>_<test name>, made before each test, removed after.
class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("psflow_data_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `bytes` to dir_/name; returns the path.
  std::string WriteFile(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  std::filesystem::path dir_;
};

}  // namespace psflow::data::testing

#endif  // PSFLOW_WORKER_DATA_FILE_TEST_FIXTURE_H_
