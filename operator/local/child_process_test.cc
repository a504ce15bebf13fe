#include "operator/local/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>

namespace psflow::local {
namespace {

// Reads everything the child writes and waits for it to exit (bounded: 10 s).
std::pair<std::string, ExitStatus> Finish(ChildProcess& p) {
  std::string out;
  auto status = p.WaitWithOutput(std::chrono::seconds(10), &out);
  EXPECT_TRUE(status.has_value()) << "child did not finish";
  return {out, status.value_or(ExitStatus{-1, 0})};
}

TEST(ChildProcess, WaitWithOutputTimesOutOnARunningChild) {
  auto p = ChildProcess::Spawn({"sh", "-c", "echo started; sleep 30"}, {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(p.ok());
  std::string out;
  EXPECT_FALSE((*p)->WaitWithOutput(std::chrono::milliseconds(300), &out).has_value());
  EXPECT_EQ(out, "started\n");
  (*p)->Signal(SIGKILL);
  EXPECT_EQ((*p)->WaitWithOutput(std::chrono::seconds(10), &out).value().signal, SIGKILL);
}

TEST(ChildProcess, MergesOutputAndReportsExitCodeWithExactEnvironment) {
  auto p = ChildProcess::Spawn({"sh", "-c", "echo out; echo err >&2; echo $GREETING; exit 3"},
                               {"GREETING=hello", "PATH=/usr/bin:/bin"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto [out, status] = Finish(**p);
  EXPECT_EQ(out, "out\nerr\nhello\n");
  EXPECT_EQ(status.code, 3);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.Describe(), "exit code 3");
}

TEST(ChildProcess, SignalReachesTheChild) {
  auto p = ChildProcess::Spawn({"sleep", "30"}, {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(p.ok());
  (*p)->Signal(SIGTERM);
  auto [out, status] = Finish(**p);
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_NE(status.Describe().find("signal 15"), std::string::npos);
}

TEST(ChildProcess, UnknownCommandIsNotFound) {
  auto p = ChildProcess::Spawn({"psflow-no-such-binary"}, {"PATH=/usr/bin:/bin"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("psflow-no-such-binary"), std::string::npos);
}

}  // namespace
}  // namespace psflow::local
