// Chief and recovery, end to end: `psflow run` with a checkpointing ps; the test SIGKILLs the ps
// process mid-training, the runner restarts it (restartPolicy OnFailure), it restores its
// partitions and global step from the newest checkpoint, the workers reconnect, and the job
// completes with the global step continuing from the checkpoint and the accuracy of an
// uninterrupted run. Five epochs, as the demo: with overlapped exchanges (one more step of
// staleness) three left the first worker to finish at 0.797 once under CI load. Also: a sync
// worker stopped by SIGTERM leaves the job cleanly and counts again once restarted.
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

// The parent of process `pid` (from /proc/<pid>/stat), or 0.
pid_t ParentOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string stat = contents.str();
  const size_t end = stat.rfind(')');  // the command name may hold spaces
  if (end == std::string::npos) return 0;
  std::istringstream fields(stat.substr(end + 2));
  char state = 0;
  pid_t parent = 0;
  fields >> state >> parent;
  return parent;
}

// A running child of `parent` whose command line contains `part` and whose environment contains
// `env_part` (e.g. one replica's TF_CONFIG task; empty: any), or 0.
pid_t FindChild(pid_t parent, const std::string& part, const std::string& env_part = "") {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  pid_t found = 0;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || ParentOf(pid) != parent) continue;
    std::ifstream cmd(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
    std::stringstream cmdline;
    cmdline << cmd.rdbuf();
    std::ifstream env(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
    std::stringstream environment;
    environment << env.rdbuf();
    if (absl::StrContains(cmdline.str(), part) && absl::StrContains(environment.str(), env_part)) {
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

// SIGKILL (a crash, the OOM killer) and SIGTERM (what the kubelet sends on a failed liveness
// probe or an eviction: the ps writes its final checkpoint and exits 0, which restartPolicy
// OnFailure alone would not restart; the job policy does, api/job_policy.h).
class RecoveryAfterSignal : public ::testing::TestWithParam<int> {};

TEST_P(RecoveryAfterSignal, StoppedPsRestartsFromItsCheckpointAndTheJobCompletes) {
  const int signal = GetParam();
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "psflow_recovery_", getpid(), "_", signal);
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
            - name: psflow
              command: [psflow-ps]
              args: [--checkpoint_dir=)"
                          << dir << R"(, --checkpoint_every_steps=100,
                     --checkpoint_every_s=0]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: psflow
              command: [psflow-worker]
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
  const bool killed = HasCheckpoint(ps_dir) && ps > 0 && kill(ps, signal) == 0;
  job.join();
  ASSERT_TRUE(killed) << "no checkpoint or no ps process to kill\n" << result.output;
  ASSERT_FALSE(result.timed_out) << result.output;
  ASSERT_TRUE(result.status.ok()) << result.status.Describe() << "\n" << result.output;

  EXPECT_EQ(LinesWith(result.output, signal == SIGKILL ? "ps-0 exited: killed by signal 9"
                                                       : "ps-0 exited: exit code 0")
                .size(),
            1u)
      << result.output;
  EXPECT_EQ(LinesWith(result.output, "restarting ps-0 (restart 1").size(), 1u) << result.output;
  // No trainer went down with the ps (a restarted one would run its 1500 steps again).
  EXPECT_EQ(LinesWith(result.output, "restarting worker-").size(), 0u) << result.output;
  const auto restored = LinesWith(result.output, "from the checkpoint at global step");
  ASSERT_EQ(restored.size(), 1u) << result.output;
  const double restored_step = Field(restored[0], "step");
  EXPECT_GE(restored_step, 100) << restored[0];
  // The trained model: the accuracy of the worker that finished last (the other's depends on
  // how far this one had got: one ended at 0.792 once).
  std::string last;
  for (const int i : {0, 1}) {
    const auto summary = LinesWith(result.output, absl::StrCat("worker ", i, " done:"));
    ASSERT_EQ(summary.size(), 1u) << result.output;
    EXPECT_EQ(Field(summary[0], "steps"), 1500) << summary[0];
    if (last.empty() || Field(summary[0], "global_step") > Field(last, "global_step")) {
      last = summary[0];
    }
  }
  EXPECT_GE(Field(last, "test_accuracy"), 0.80) << last;
  // The step went on from the checkpoint: only the pushes after it and before the kill are lost.
  const auto stopped = LinesWith(result.output, "ps task 0 stopped: global_step=");
  ASSERT_EQ(stopped.size(), signal == SIGTERM ? 2u : 1u) << result.output;
  if (signal == SIGTERM) {  // its final checkpoint held every step it had: nothing was lost
    EXPECT_EQ(restored_step, Field(stopped[0], "global_step")) << result.output;
  }
  const double final_step = Field(stopped.back(), "global_step");
  EXPECT_GT(final_step, restored_step + 1500) << stopped.back();
  EXPECT_LE(final_step, 3000) << result.output;
  std::filesystem::remove_all(dir);
  std::filesystem::remove(manifest);
}

INSTANTIATE_TEST_SUITE_P(Signals, RecoveryAfterSignal, ::testing::Values(SIGKILL, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return param.param == SIGKILL ? std::string("Sigkill")
                                                         : std::string("Sigterm");
                         });

// The highest "global_step N" in the file's progress lines; -1 when there is none yet.
int64_t LastGlobalStep(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t last = -1;
  while (std::getline(in, line)) {
    const size_t at = line.find(" global_step ");
    if (at != std::string::npos) {
      last = std::max<int64_t>(last, std::atoll(line.c_str() + at + 13));
    }
  }
  return last;
}

// A job of one ps (no checkpoints) and two workers taking `worker_args` (a YAML flow list's
// items), restartPolicy OnFailure and backoffLimit 2, written to `manifest`.
void WriteTwoWorkerJob(const std::string& manifest, const std::string& name,
                       const std::string& worker_args) {
  std::ofstream(manifest) << "apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: "
                          << name << R"(}
spec:
  runPolicy: {activeDeadlineSeconds: 200, backoffLimit: 2}
  replicaSpecs:
    PS:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: psflow
              command: [psflow-ps]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: psflow
              command: [psflow-worker]
              args: [)" << worker_args
                          << "]\n";
}

// `psflow run --verbose --run_dir=RUNS MANIFEST` on a thread of its own, 240 s at most.
class BackgroundRun {
 public:
  BackgroundRun(std::string manifest, std::string runs)
      : manifest_(std::move(manifest)), runs_(std::move(runs)), thread_([this] {
          result_ =
              RunCommand({Binary("psflow"), "run", "--verbose", "--run_dir=" + runs_, manifest_},
                         Environment({}), std::chrono::seconds(240));
        }) {}
  ~BackgroundRun() {
    if (thread_.joinable()) thread_.join();
  }

  // Waits, up to `within`, until the replica log `log` (e.g. "worker-0.log") shows a global step
  // of at least `step`; the highest step it shows then (-1: none).
  int64_t WaitForGlobalStep(const std::string& log, int64_t step,
                            std::chrono::seconds within) const {
    const auto give_up = std::chrono::steady_clock::now() + within;
    int64_t seen = -1;
    while (std::chrono::steady_clock::now() < give_up) {
      seen = LastGlobalStep(runs_ + "/" + log);
      if (seen >= step) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return seen;
  }
  // The `psflow run` process, or 0.
  pid_t Pid() const { return FindProcess({"psflow", "run", manifest_}); }
  // Waits for it to end.
  const CommandResult& Finish() {
    thread_.join();
    return result_;
  }

 private:
  const std::string manifest_;
  const std::string runs_;
  CommandResult result_;
  std::thread thread_;
};

// A ps with no checkpoint dir, SIGKILLed mid-training and restarted: the chief re-creates its
// variables from its own copy, the step resumes from the chief's last known one (never back to
// 0), the ps and the chief each say in one WARNING line that progress was lost, and the job
// completes.
TEST(Recovery, KilledPsWithoutACheckpointResumesTheGlobalStepAndSaysProgressWasLost) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "psflow_recovery_nockpt_", getpid());
  std::filesystem::remove_all(dir);
  const std::string manifest = dir + ".yaml";
  WriteTwoWorkerJob(manifest, "recover-nockpt",
                    "--learning_rate=0.2, --train_epochs=3, --compute_threads=1, "
                    "--log_every_steps=20, --ps_timeout_s=60");
  const std::string runs = dir + "/runs";
  BackgroundRun run(manifest, runs);
  // Kill the ps once the chief has seen the global step pass 300.
  constexpr int64_t kKillAfter = 300;
  const int64_t seen_before_kill =
      run.WaitForGlobalStep("worker-0.log", kKillAfter, std::chrono::seconds(120));
  // This job's ps: the child of this test's `psflow run`.
  const pid_t ps = FindChild(run.Pid(), "psflow-ps");
  const bool killed = seen_before_kill >= kKillAfter && ps > 0 && kill(ps, SIGKILL) == 0;
  const CommandResult& result = run.Finish();
  ASSERT_TRUE(killed) << "the step did not reach " << kKillAfter << " or no ps to kill\n"
                      << result.output;
  ASSERT_FALSE(result.timed_out) << result.output;
  ASSERT_TRUE(result.status.ok()) << result.status.Describe() << "\n" << result.output;
  EXPECT_EQ(LinesWith(result.output, "ps-0 exited: killed by signal 9").size(), 1u)
      << result.output;

  // The ps: one WARNING naming the step it resumes at, at least the step seen before the kill.
  const auto ps_warning = LinesWith(result.output, "ps task 0 lost its training progress");
  ASSERT_EQ(ps_warning.size(), 1u) << result.output;
  const size_t at = ps_warning[0].find("global step resumes at ");
  ASSERT_NE(at, std::string::npos) << ps_warning[0];
  const int64_t resumed = std::atoll(ps_warning[0].c_str() + at + 23);
  EXPECT_GE(resumed, seen_before_kill) << ps_warning[0];
  // The chief: one WARNING too.
  const auto chief_warning = LinesWith(result.output, "lost its training progress (restarted");
  EXPECT_EQ(chief_warning.size(), 2u) << result.output;  // the ps's and the chief's
  for (const int i : {0, 1}) {
    const auto summary = LinesWith(result.output, absl::StrCat("worker ", i, " done:"));
    ASSERT_EQ(summary.size(), 1u) << result.output;
    EXPECT_EQ(Field(summary[0], "steps"), 900) << summary[0];
  }
  // The step went on from there: the pushes after the restart count on top of it.
  const auto stopped = LinesWith(result.output, "ps task 0 stopped: global_step=");
  ASSERT_EQ(stopped.size(), 1u) << result.output;
  EXPECT_GT(Field(stopped[0], "global_step"), static_cast<double>(resumed)) << stopped[0];
  EXPECT_LE(Field(stopped[0], "global_step"), 1800) << stopped[0];
  std::filesystem::remove_all(dir);
  std::filesystem::remove(manifest);
}

// Elastic workers, as a pod deletion ends one (a `kubectl scale` down, an eviction): a sync
// worker sent SIGTERM mid-training ends after its step, completes its push, leaves the job and
// exits 143; the ps logs that it left and that a step now waits for the one worker left, no
// push of it is given up half-way, and the other trains on alone. `psflow run` restarts it
// (restartPolicy OnFailure: 143 is a failure, as the kubelet reports a stopped container), its
// first push makes it count again, and the job succeeds.
TEST(Recovery, ASyncWorkerStoppedBySigtermLeavesCleanlyAndRejoinsWhenRestarted) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "psflow_worker_stop_", getpid());
  std::filesystem::remove_all(dir);
  const std::string manifest = dir + ".yaml";
  WriteTwoWorkerJob(manifest, "elastic",
                    "--learning_rate=0.2, --train_steps=800, --sync_replicas, "
                    "--compute_threads=1, --log_every_steps=20, --ps_timeout_s=60");
  BackgroundRun run(manifest, dir + "/runs");
  constexpr int64_t kStopAfter = 100;
  const int64_t seen = run.WaitForGlobalStep("worker-1.log", kStopAfter, std::chrono::seconds(120));
  const pid_t worker = FindChild(run.Pid(), "psflow-worker", R"("index":1,"type":"worker")");
  const bool stopped = seen >= kStopAfter && worker > 0 && kill(worker, SIGTERM) == 0;
  const CommandResult& result = run.Finish();
  ASSERT_TRUE(stopped) << "the step did not reach " << kStopAfter << " or no worker 1 to stop\n"
                       << result.output;
  ASSERT_FALSE(result.timed_out) << result.output;
  ASSERT_TRUE(result.status.ok()) << result.status.Describe() << "\n" << result.output;

  EXPECT_EQ(LinesWith(result.output, "worker-1 exited: exit code 143").size(), 1u) << result.output;
  EXPECT_EQ(LinesWith(result.output, "restarting worker-1 (restart 1").size(), 1u) << result.output;
  const auto said_stop = LinesWith(result.output, "of 800 steps: leaving the job");
  ASSERT_GE(said_stop.size(), 1u) << result.output;
  // The ps: worker 1 left once it had stopped, the steps then waited for worker 0 alone, and
  // worker 1 counted again after its restart; nothing of it was given up half-way.
  const auto left = LinesWith(result.output, "worker 1 left at step ");
  ASSERT_GE(left.size(), 1u) << result.output;
  EXPECT_TRUE(absl::StrContains(left[0], ": 1 worker(s); a step waits for 1 contribution(s)"))
      << left[0];
  const size_t left_at = result.output.find("worker 1 left at step ");
  const size_t joined_at = result.output.find("worker 1 joined at step ", left_at);
  EXPECT_NE(joined_at, std::string::npos) << result.output;
  EXPECT_EQ(LinesWith(result.output, "stayed incomplete").size(), 0u) << result.output;
  const auto chief = LinesWith(result.output, "worker 0 done:");
  ASSERT_EQ(chief.size(), 1u) << result.output;
  EXPECT_EQ(Field(chief[0], "steps"), 800) << chief[0];
  std::filesystem::remove_all(dir);
  std::filesystem::remove(manifest);
}

}  // namespace
}  // namespace psflow::testing
