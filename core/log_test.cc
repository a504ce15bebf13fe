#include "core/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace psflow {
namespace {

// Runs `body` with stderr redirected to a temporary file; returns what it wrote.
template <class Body>
std::string CaptureStderr(Body body) {
  char path[] = "/tmp/psflow_log_test_XXXXXX";
  const int fd = mkstemp(path);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  body();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  return text.str();
}

TEST(Log, TextLineHasLevelCallerAndMessage) {
  const std::string line = CaptureStderr([] { PSFLOW_LOG(WARNING) << "disk " << 93 << "% full"; });
  EXPECT_EQ(line.substr(0, 2), "W ");
  EXPECT_NE(line.find(" log_test.cc:"), std::string::npos) << line;
  const std::string tail = "] disk 93% full\n";
  ASSERT_GT(line.size(), tail.size());
  EXPECT_EQ(line.substr(line.size() - tail.size()), tail) << line;
}

TEST(Log, JsonLineIsOneParsableObject) {
  SetLogFormat(LogFormat::kJson);
  const std::string line =
      CaptureStderr([] { PSFLOW_LOG(ERROR) << "quote \" backslash \\ newline \n tab\t end"; });
  SetLogFormat(LogFormat::kText);
  ASSERT_EQ(line.back(), '\n');
  ASSERT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
  const nlohmann::json parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["level"], "error");
  EXPECT_EQ(parsed["msg"], "quote \" backslash \\ newline \n tab\t end");
  EXPECT_EQ(parsed["caller"].get<std::string>().rfind("log_test.cc:", 0), 0u);
  const std::string ts = parsed["ts"];
  EXPECT_EQ(ts.size(), 24u) << ts;  // 2026-11-23T03:21:07.123Z
  EXPECT_EQ(ts.back(), 'Z');
}

}  // namespace
}  // namespace psflow
