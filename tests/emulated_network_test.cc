// End to end: `psflow run --emulate_network` runs a real 1-ps/2-worker job with every replica in
// a network namespace of its own behind a shaped link; what crossed each link respects the
// shaping, and no namespace of the run is left afterwards, whether it ended by itself or by
// Ctrl-C; namespaces abandoned by a killed run are removed; a bad spec is refused up front.
// Needs root and iproute2 (CI has both); skipped without root.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/test_util.h"

namespace psflow::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kRateBytesPerSecond = 200e6 / 8;  // --emulate_network=200mbit
constexpr double kTolerance = 1.1;
// What one step moves each way: mnist_mlp's parameters (or their gradients) as float32.
constexpr double kModelBytes = 318040;
constexpr int kSteps = 200;

std::string RunDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "psflow_net_", getpid(), "_", name);
  fs::remove_all(dir);
  return dir;
}

// A job whose step is mostly its transfers over a 200mbit link: 1 ps, 2 workers, the MLP on
// synthetic data (about 30 ms of transfers per step against 3 ms of compute).
std::string WriteNetJob(int steps, int log_every) {
  return WriteJob(
      ::testing::TempDir() + "psflow_net_job.yaml", "net", 2,
      {"--model=mnist_mlp", "--data_source=synthetic", "--compute_threads=1",
       absl::StrCat("--train_steps=", steps), absl::StrCat("--log_every_steps=", log_every)});
}

// The named network namespaces whose name starts with `prefix`.
std::vector<std::string> NamespacesWith(const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/run/netns", error)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, prefix)) names.push_back(name);
  }
  return names;
}

// "psf-<pid>-" from the runner's "network: emulated, ... (psf-<pid>-*, ..." line.
std::string PrefixIn(const std::string& output) {
  const size_t at = output.find("each replica in its own namespace (psf-");
  if (at == std::string::npos) return "";
  const size_t start = output.find("psf-", at);
  return output.substr(start, output.find('*', start) - start);
}

// A pid that belongs to no process: a child's, once it has been reaped.
pid_t DeadPid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

class EmulatedNetwork : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "--emulate_network needs root";
  }
};

TEST_F(EmulatedNetwork, ShapedLinksCarryTheJobAndAreRemovedAfterIt) {
  // What a run killed with SIGKILL leaves: its namespaces, named for a pid that is gone.
  const std::string abandoned = absl::StrCat("psf-", DeadPid(), "-worker-0");
  ASSERT_EQ(RunCommand({"ip", "netns", "add", abandoned}, Environment({}), std::chrono::seconds(30))
                .status.code,
            0);

  const std::string dir = RunDir("shaped");
  const CommandResult r =
      RunCommand({Binary("psflow"), "run", "--progress=never", "--verbose", "--run_dir=" + dir,
                  "--emulate_network=200mbit", WriteNetJob(kSteps, 100)},
                 Environment({}), std::chrono::seconds(120));
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_EQ(r.status.code, 0) << r.output;
  // The tensor bytes cross the shaped links: no shared memory beside them.
  EXPECT_TRUE(LinesWith(r.output, "through shared memory").empty()) << r.output;
  EXPECT_EQ(LinesWith(r.output,
                      "network namespaces left by an earlier psflow run that was "
                      "killed: " +
                          abandoned)
                .size(),
            1u)
      << r.output;
  EXPECT_TRUE(NamespacesWith(abandoned).empty());
  // Said before the replicas start.
  const auto said = LinesWith(r.output,
                              "[psflow] network: emulated, 200mbit, each replica in its "
                              "own namespace (psf-");
  ASSERT_EQ(said.size(), 1u) << r.output;
  EXPECT_LT(r.output.find(said[0]), r.output.find("[psflow] job net: starting 3 replicas"));
  const std::string prefix = PrefixIn(r.output);
  ASSERT_FALSE(prefix.empty()) << r.output;

  // The workers' training time, from their done: lines.
  double seconds[2];
  for (const int i : {0, 1}) {
    const auto done = LinesWith(r.output, absl::StrCat("worker ", i, " done: "));
    ASSERT_EQ(done.size(), 1u) << r.output;
    EXPECT_EQ(Field(done[0], "steps"), kSteps) << done[0];
    seconds[i] = Field(done[0], "seconds");
    ASSERT_GT(seconds[i], 0) << done[0];
  }
  // What crossed each link, each way, counted by the replica's end of it. Every link is shaped
  // to 200mbit each way; the ps's carries both workers' traffic while either trains.
  auto link = [&](const std::string& replica, const char* direction) {
    const auto line = LinesWith(r.output, "[psflow] network: " + replica + " sent_bytes=");
    return line.size() == 1 ? Field(line[0], direction) : -1;
  };
  for (const char* direction : {"sent_bytes", "received_bytes"}) {
    for (const int i : {0, 1}) {
      const std::string worker = absl::StrCat("worker-", i);
      const double bytes = link(worker, direction);
      // At least its own transfers: a parameter pull and a gradient push per step.
      EXPECT_GE(bytes, kSteps * kModelBytes) << worker << " " << direction << "\n" << r.output;
      EXPECT_LE(bytes / seconds[i], kTolerance * kRateBytesPerSecond)
          << worker << " " << direction << ": " << bytes << " bytes in " << seconds[i] << " s";
    }
    const double ps = link("ps-0", direction), longest = std::max(seconds[0], seconds[1]);
    EXPECT_GE(ps, 2 * kSteps * kModelBytes) << direction << "\n" << r.output;
    EXPECT_LE(ps / longest, kTolerance * kRateBytesPerSecond)
        << "ps-0 " << direction << ": " << ps << " bytes in " << longest << " s";
    std::printf("ps-0 %s: %.0f bytes in %.2f s = %.1f MB/s (shaped to %.1f MB/s)\n", direction, ps,
                longest, ps / longest / 1e6, kRateBytesPerSecond / 1e6);
  }
  EXPECT_EQ(LinesWith(r.output, "[psflow] network: namespaces " + prefix + "* removed").size(), 1u)
      << r.output;
  EXPECT_TRUE(NamespacesWith(prefix).empty());
  fs::remove_all(dir);
}

TEST_F(EmulatedNetwork, InterruptRemovesTheNamespaces) {
  const std::string dir = RunDir("interrupt");
  auto run = local::ChildProcess::Spawn(
      {Binary("psflow"), "run", "--progress=never", "--verbose", "--run_dir=" + dir,
       "--emulate_network=1gbit", WriteNetJob(1'000'000, 20)},
      Environment({}));
  ASSERT_TRUE(run.ok()) << run.status();
  // Wait (bounded) until a worker trains, then Ctrl-C the runner alone.
  std::string output;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto read_some = [&] {
    pollfd fd{(*run)->output_fd(), POLLIN, 0};
    poll(&fd, 1, 100);
    char buf[65536];
    const ssize_t n = read((*run)->output_fd(), buf, sizeof(buf));
    if (n > 0) output.append(buf, static_cast<size_t>(n));
    return n;
  };
  while (LinesWith(output, "step 20/").empty() && std::chrono::steady_clock::now() < give_up) {
    read_some();
  }
  ASSERT_FALSE(LinesWith(output, "step 20/").empty()) << output;
  const std::string prefix = PrefixIn(output);
  ASSERT_FALSE(prefix.empty()) << output;
  EXPECT_EQ(NamespacesWith(prefix).size(), 4u);  // the bridge's and each replica's
  kill((*run)->pid(), SIGINT);
  while (read_some() != 0) ASSERT_LT(std::chrono::steady_clock::now(), give_up) << output;
  std::optional<local::ExitStatus> status;
  while (!(status = (*run)->Poll())) usleep(10000);
  EXPECT_EQ(status->code, 130) << output;
  EXPECT_EQ(LinesWith(output, "job net Interrupted").size(), 1u) << output;
  EXPECT_EQ(LinesWith(output, "[psflow] network: namespaces " + prefix + "* removed").size(), 1u)
      << output;
  EXPECT_TRUE(NamespacesWith(prefix).empty());
  fs::remove_all(dir);
}

// No root needed: the spec is checked before anything else.
TEST(EmulatedNetworkFlag, ABadSpecIsRefusedInOneLine) {
  const CommandResult r =
      RunCommand({Binary("psflow"), "run", "--emulate_network=1gbps,1ms", WriteNetJob(10, 0)},
                 Environment({}), std::chrono::seconds(30));
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status.code, 2) << r.output;
  EXPECT_EQ(r.output,
            "psflow: --emulate_network=\"1gbps,1ms\": RATE \"1gbps\" is not a number of kbit, "
            "mbit, gbit or tbit (per second) (expected RATE[,DELAY[,LOSS]], e.g. 1gbit or "
            "10gbit,0.2ms or 25gbit,1ms,0.1%)\n");
}

}  // namespace
}  // namespace psflow::testing
