// Chief and recovery, end to end: `psflow run` with a checkpointing ps; the test SIGKILLs the ps
// process mid-training, the runner restarts it (restartPolicy OnFailure), it restores its
// partitions and global step from the newest checkpoint, the workers reconnect, and the job
// completes with the global step continuing from the checkpoint and the accuracy of an
// uninterrupted run. Five epochs, as the demo: with overlapped exchanges (one more step of
// staleness) three left the first worker to finish at 0.797 once under CI load.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/test_util.h"

namespace psflow::testing {
namespace {

// The pid of the running process whose command line contains every one of `parts`, or 0.
pid_t FindProcess(const std::vector<std::string>& parts) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  pid_t found = 0;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
    std::stringstream cmdline;
    cmdline << in.rdbuf();
    bool all = true;
    for (const auto& p : parts) all = all && absl::StrContains(cmdline.str(), p);
    if (all) {
      found = pid;
      break;
    }
  }
  closedir(proc);
  return found;
}

bool HasCheckpoint(const std::string& dir) {
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (absl::StartsWith(f.path().filename().string(), "ckpt-")) return true;
  }
  return false;
}

TEST(Recovery, KilledPsRestartsFromItsCheckpointAndTheJobCompletes) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "psflow_recovery_", getpid());
  std::filesystem::remove_all(dir);
  const std::string manifest = dir + ".yaml";
  std::ofstream(manifest) << R"(apiVersion: psflow.io/v1alpha1
kind: TrainingJob
metadata: {name: recover}
spec:
  runPolicy: {activeDeadlineSeconds: 200, backoffLimit: 2}
  replicaSpecs:
    PS:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - command: [psflow-ps]
              args: [--checkpoint_dir=)"
                          << dir << R"(, --checkpoint_every_steps=100,
                     --checkpoint_every_s=0]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - command: [psflow-worker]
              args: [--learning_rate=0.2, --train_epochs=5, --compute_threads=1,
                     --log_every_steps=0, --ps_timeout_s=60]
)";
  CommandResult result;
  std::thread job([&] {
    result =
        RunCommand({Binary("psflow"), "run", "--verbose", "--run_dir=" + dir + "/runs", manifest},
                   Environment({}), std::chrono::seconds(240));
  });
  // Wait for the first checkpoint, then kill the ps the hard way.
  const std::string ps_dir = dir + "/ps-0";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!HasCheckpoint(ps_dir) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const pid_t ps = FindProcess({"psflow-ps", ps_dir.substr(0, ps_dir.size() - 5)});
  const bool killed = HasCheckpoint(ps_dir) && ps > 0 && kill(ps, SIGKILL) == 0;
  job.join();
  ASSERT_TRUE(killed) << "no checkpoint or no ps process to kill\n" << result.output;
  ASSERT_FALSE(result.timed_out) << result.output;
  ASSERT_TRUE(result.status.ok()) << result.status.Describe() << "\n" << result.output;

  EXPECT_EQ(LinesWith(result.output, "ps-0 exited: killed by signal 9").size(), 1u)
      << result.output;
  EXPECT_EQ(LinesWith(result.output, "restarting ps-0 (restart 1").size(), 1u) << result.output;
  const auto restored = LinesWith(result.output, "from the checkpoint at global step");
  ASSERT_EQ(restored.size(), 1u) << result.output;
  const double restored_step = Field(restored[0], "step");
  EXPECT_GE(restored_step, 100) << restored[0];
  for (const int i : {0, 1}) {
    const auto summary = LinesWith(result.output, absl::StrCat("worker ", i, " done:"));
    ASSERT_EQ(summary.size(), 1u) << result.output;
    EXPECT_EQ(Field(summary[0], "steps"), 1500) << summary[0];
    EXPECT_GE(Field(summary[0], "test_accuracy"), 0.80) << summary[0];
  }
  // The step went on from the checkpoint: only the pushes after it and before the kill are lost.
  const auto stopped = LinesWith(result.output, "ps task 0 stopped: global_step=");
  ASSERT_EQ(stopped.size(), 1u) << result.output;
  const double final_step = Field(stopped[0], "global_step");
  EXPECT_GT(final_step, restored_step + 1500) << stopped[0];
  EXPECT_LE(final_step, 3000) << stopped[0];
  std::filesystem::remove_all(dir);
  std::filesystem::remove(manifest);
}

}  // namespace
}  // namespace psflow::testing
