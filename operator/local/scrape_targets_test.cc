#include "operator/local/scrape_targets.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"

namespace psflow::local {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(FileSdJson, OneGroupPerTargetWithItsLabels) {
  const std::string text = FileSdJson(
      {{"127.0.0.1:9100", "mnist \"a\"", "ps", 0}, {"127.0.0.1:9101", "mnist \"a\"", "worker", 1}});
  const nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["targets"], nlohmann::json::array({"127.0.0.1:9101"}));
  EXPECT_EQ(j[1]["labels"]["job"], "mnist \"a\"");
  EXPECT_EQ(j[1]["labels"]["replica_type"], "worker");
  EXPECT_EQ(j[1]["labels"]["replica_index"], "1");  // file_sd labels are strings
  EXPECT_EQ(FileSdJson({}), "[]\n");
}

TEST(WriteFileAtomically, ReplacesTheFileAndLeavesNoTemporary) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("psflow_atomic_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "targets.json";
  ASSERT_TRUE(WriteFileAtomically(file.string(), "[1]\n").ok());
  ASSERT_TRUE(WriteFileAtomically(file.string(), "[]\n").ok());
  EXPECT_EQ(Read(file), "[]\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(WriteFileAtomically, AMissingFolderIsOneErrorNamingThePath) {
  const absl::Status s = WriteFileAtomically("/nonexistent-psflow-dir/targets.json", "[]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "cannot write /nonexistent-psflow-dir/targets.json: No such file or directory");
}

}  // namespace
}  // namespace psflow::local
