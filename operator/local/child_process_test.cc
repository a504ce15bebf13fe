#include "operator/local/child_process.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace psflow::local {
namespace {

// Reads everything the child writes, then waits for it to exit (bounded: 10 s).
std::pair<std::string, ExitStatus> Finish(ChildProcess& p) {
  std::string out;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    if (p.output_fd() >= 0) {
      pollfd fd{p.output_fd(), POLLIN, 0};
      poll(&fd, 1, 50);
      char buf[256];
      const ssize_t n = read(p.output_fd(), buf, sizeof(buf));
      if (n > 0) out.append(buf, static_cast<size_t>(n));
      if (n == 0) p.CloseOutput();
    } else if (auto s = p.Poll()) {
      return {out, *s};
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ADD_FAILURE() << "child did not finish";
  return {out, ExitStatus{-1, 0}};
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
