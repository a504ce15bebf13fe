#include "tests/faults/fault_trial.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/http_get.h"
#include "core/prometheus_text.h"
#include "ps/checkpoint.h"
#include "tests/test_util.h"

namespace psflow::faults {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using psflow::testing::Binary;

constexpr char kTagVariable[] = "PSFLOW_FAULT_TRIAL";
constexpr auto kTick = std::chrono::milliseconds(50);
constexpr auto kScrapeEvery = std::chrono::milliseconds(100);
constexpr auto kCheckpointScanEvery = std::chrono::milliseconds(250);

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One process of the trial, as /proc tells it.
struct ReplicaProcess {
  pid_t pid = 0;
  int metrics_port = -1;
};

// The trial's replica processes by name ("ps-0"): every process whose environment carries the
// tag and a replica type, and whose program is one of psflow's (not `ip netns exec` on its way).
std::map<std::string, ReplicaProcess> FindReplicas(const std::string& tag) {
  std::map<std::string, ReplicaProcess> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  const std::string wanted = absl::StrCat(kTagVariable, "=", tag);
  while (dirent* e = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
    const std::string cmdline = ReadWhole(absl::StrCat("/proc/", pid, "/cmdline"));
    const std::string program = cmdline.substr(0, cmdline.find('\0'));
    if (!absl::StartsWith(fs::path(program).filename().string(), "psflow-")) continue;
    std::string type, index;
    ReplicaProcess p{pid, -1};
    bool tagged = false;
    for (absl::string_view v :
         absl::StrSplit(ReadWhole(absl::StrCat("/proc/", pid, "/environ")), '\0')) {
      if (v == wanted) tagged = true;
      if (absl::ConsumePrefix(&v, "PSFLOW_REPLICA_TYPE=")) type = std::string(v);
      if (absl::ConsumePrefix(&v, "PSFLOW_REPLICA_INDEX=")) index = std::string(v);
      if (absl::ConsumePrefix(&v, "PSFLOW_METRICS_PORT=")) {
        if (!absl::SimpleAtoi(v, &p.metrics_port)) p.metrics_port = -1;
      }
    }
    if (tagged && !type.empty()) found[absl::StrCat(type, "-", index)] = p;
  }
  closedir(proc);
  return found;
}

// Every process still carrying the tag, whatever its program: "pid cmdline" each.
std::vector<std::string> TaggedProcesses(const std::string& tag) {
  std::vector<std::string> left;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return left;
  const std::string wanted = absl::StrCat(kTagVariable, "=", tag);
  while (dirent* e = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0 || pid == getpid()) continue;
    const std::string env = ReadWhole(absl::StrCat("/proc/", pid, "/environ"));
    bool tagged = false;
    for (absl::string_view v : absl::StrSplit(env, '\0')) tagged = tagged || v == wanted;
    if (!tagged) continue;
    std::string cmdline = ReadWhole(absl::StrCat("/proc/", pid, "/cmdline"));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    left.push_back(absl::StrCat(pid, " ", cmdline));
    kill(pid, SIGKILL);  // the next trial must not meet it
  }
  closedir(proc);
  return left;
}

std::string Manifest(const TrialOptions& o, const std::string& checkpoints) {
  const std::string trainer_args = absl::StrCat(
      "[--model=mnist_mlp, --learning_rate=", o.learning_rate, ", --train_steps=", o.train_steps,
      ", --compute_threads=1, --log_every_steps=0, --ps_timeout_s=120]");
  auto replica = [](const char* type, int n, const char* command, const std::string& args) {
    return absl::StrCat(
        "    ", type, ":\n      replicas: ", n,
        "\n      restartPolicy: OnFailure\n      template:\n        spec:\n"
        "          containers:\n            - name: psflow\n              command: [",
        command, "]\n              args: ", args, "\n");
  };
  std::string m =
      absl::StrCat("apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: ", o.name,
                   "}\nspec:\n  successPolicy: AllWorkers\n  runPolicy: {activeDeadlineSeconds: ",
                   o.timeout.count() - 10,
                   ", backoffLimit: 50, finishGraceSeconds: 60}\n"
                   "  replicaSpecs:\n");
  m += replica("Chief", 1, "psflow-worker", trainer_args);
  m += replica("PS", o.ps, "psflow-ps",
               absl::StrCat("[--checkpoint_dir=", checkpoints,
                            ", --checkpoint_every_steps=", o.checkpoint_every_steps,
                            ", --checkpoint_every_s=0, --keep_checkpoints=3]"));
  if (o.workers > 0) m += replica("Worker", o.workers, "psflow-worker", trainer_args);
  return m;
}

// Reads each checkpoint file under `dir` not read before; a defect becomes a broken invariant.
class CheckpointAuditor {
 public:
  explicit CheckpointAuditor(std::string dir) : dir_(std::move(dir)) {}

  void Scan(TrialReport& report, bool final) {
    std::error_code ec;
    int temps = 0;
    for (const auto& task : fs::directory_iterator(dir_, ec)) {
      std::error_code ec2;
      for (const auto& f : fs::directory_iterator(task.path(), ec2)) {
        const std::string name = f.path().filename().string();
        if (absl::StrContains(name, ".tmp.")) {
          ++temps;
          continue;
        }
        const std::string path = f.path().string();
        if (!final && read_.count(path) > 0) continue;
        auto ckpt = ReadCheckpointFile(path);
        if (!ckpt.ok() && absl::IsNotFound(ckpt.status())) continue;  // rotated away meanwhile
        read_.insert(path);
        ++report.checkpoints_read;
        if (!ckpt.ok()) {
          report.broken.push_back(absl::StrCat("checkpoint unreadable: ", ckpt.status().message()));
          continue;
        }
        // ckpt-<global step, 12 digits>.psck
        int64_t named = -1;
        absl::string_view digits = name;
        if (!absl::ConsumePrefix(&digits, "ckpt-") || !absl::ConsumeSuffix(&digits, ".psck") ||
            !absl::SimpleAtoi(digits, &named) || named != ckpt->global_step) {
          report.broken.push_back(absl::StrCat("checkpoint ", path, " holds global step ",
                                               ckpt->global_step, ", its name says otherwise"));
        }
      }
    }
    if (final) report.temp_files = temps;
  }

 private:
  std::string dir_;
  std::set<std::string> read_;
};

// The global step of a ps task as its log tells it, in order: each checkpoint written, each
// restore, each (re)initialisation by the chief (step 0) and the stop.
std::vector<int64_t> StepsInLog(const std::string& log) {
  std::vector<int64_t> steps;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    double v = NAN;
    if (absl::StrContains(line, "from the checkpoint at global step=")) {
      v = psflow::testing::Field(line, "step");
    } else if (absl::StrContains(line, "checkpoint at global step ")) {
      v = std::strtod(line.c_str() + line.find("global step ") + 12, nullptr);
    } else if (absl::StrContains(line, "stopped: global_step=")) {
      v = psflow::testing::Field(line, "global_step");
    } else if (absl::StrContains(line, "] initialised ") ||
               absl::StartsWith(line, "initialised ")) {
      v = 0;
    }
    if (!std::isnan(v)) steps.push_back(static_cast<int64_t>(v));
  }
  return steps;
}

// The test accuracy of the trained model: of the `done:` line, among the trainers' logs in
// `run_dir`, with the highest global step (the trainer that finished last evaluated the most
// trained parameters; the chief's own figure depends on how far the others had got when it ended).
std::optional<double> FinalAccuracyIn(const std::string& run_dir) {
  std::optional<double> accuracy;
  double highest = -1;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(run_dir, ec)) {
    const std::string name = f.path().filename().string();
    if (!absl::StartsWith(name, "chief-") && !absl::StartsWith(name, "worker-")) continue;
    for (const std::string& line : psflow::testing::LinesWith(ReadWhole(f.path()), " done: ")) {
      const double step = psflow::testing::Field(line, "global_step");
      const double a = psflow::testing::Field(line, "test_accuracy");
      if (std::isnan(step) || std::isnan(a) || step <= highest) continue;
      highest = step;
      accuracy = a;
    }
  }
  return accuracy;
}

// The newest checkpoint of ps task `task` under `dir` that reads back valid: its global step, -1
// when there is none.
int64_t NewestCheckpointStep(const std::string& dir, int task) {
  std::vector<std::string> files = CheckpointDir(dir, task, 1).List();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    if (auto c = ReadCheckpointFile(*it); c.ok()) return c->global_step;
  }
  return -1;
}

// Waits (up to 10 s) until process `pid` is gone or a zombie: killed, it writes nothing more.
void AwaitDeath(pid_t pid) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    const std::string stat = ReadWhole(absl::StrCat("/proc/", pid, "/stat"));
    const size_t paren = stat.rfind(')');
    if (stat.empty() ||
        (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z')) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A restart stopped before it got as far as restoring (the job ended while it started): it lost
// nothing and restored nothing, so there is nothing to check.
constexpr int64_t kStoppedWhileStarting = -2;

// Per restart of a ps task, as its log tells it (psflow run's "[psflow] ps-<i> restarted" line
// starts each): the global step it restored, -1 when it found no checkpoint (it went on to serve
// without one), or kStoppedWhileStarting when it neither restored nor served (the ps restores
// before it serves).
std::vector<int64_t> RestoresInLog(const std::string& log) {
  std::vector<int64_t> restores;
  std::vector<bool> served;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "[psflow] ps-") && absl::StrContains(line, " restarted")) {
      restores.push_back(-1);
      served.push_back(false);
    } else if (!restores.empty() &&
               absl::StrContains(line, "from the checkpoint at global step=")) {
      restores.back() = static_cast<int64_t>(psflow::testing::Field(line, "step"));
    } else if (!restores.empty() && absl::StrContains(line, " serving on ")) {
      served.back() = true;
    }
  }
  for (size_t k = 0; k < restores.size(); ++k) {
    if (restores[k] == -1 && !served[k]) restores[k] = kStoppedWhileStarting;
  }
  return restores;
}

std::string FindTool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string path = absl::StrCat(dir, name);
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return name;
}

// Brings replica `name`'s link to the bridge of runner `runner`'s emulated network up or down
// (network_emulation.h: namespaces psf-<runner pid>-br and psf-<runner pid>-<replica>; the
// replica's eth0 is a veth whose peer sits on the bridge). Returns what went wrong, or "".
std::string SetLink(pid_t runner, const std::string& name, bool up) {
  const std::string ip = FindTool("ip");
  const std::string prefix = absl::StrCat("psf-", runner, "-");
  const auto env = psflow::testing::Environment({});
  // "2: eth0@if7: <...>": the peer's index on the bridge side is 7.
  auto self = psflow::testing::RunCommand({ip, "-n", prefix + name, "-o", "link", "show", "eth0"},
                                          env, std::chrono::seconds(10));
  const size_t at = self.output.find("eth0@if");
  if (!self.status.ok() || at == std::string::npos) return "no eth0 in " + prefix + name;
  const std::string peer_index = absl::StrCat(std::atoi(self.output.c_str() + at + 7));
  auto bridge = psflow::testing::RunCommand({ip, "-n", prefix + "br", "-o", "link", "show"}, env,
                                            std::chrono::seconds(10));
  for (const auto& line : absl::StrSplit(bridge.output, '\n')) {
    if (!absl::StartsWith(line, peer_index + ": ")) continue;
    absl::string_view port = line.substr(peer_index.size() + 2);
    port = port.substr(0, port.find_first_of("@:"));
    auto set = psflow::testing::RunCommand(
        {ip, "-n", prefix + "br", "link", "set", std::string(port), up ? "up" : "down"}, env,
        std::chrono::seconds(10));
    return set.status.ok() ? "" : set.output;
  }
  return "no bridge port for " + name;
}

// A fault's later half: SIGCONT to a paused process, a link brought back up.
struct Undo {
  Clock::time_point at;
  Fault fault;
  pid_t pid = 0;
};

}  // namespace

TrialReport RunTrial(const TrialOptions& o) {
  TrialReport report;
  fs::remove_all(o.dir);
  fs::create_directories(o.dir);
  const std::string checkpoints = o.dir + "/checkpoints";
  const std::string manifest = o.dir + "/job.yaml";
  report.run_dir = o.dir + "/run";
  std::ofstream(manifest) << Manifest(o, checkpoints);
  const std::string tag =
      absl::StrCat(o.name, "-", getpid(), "-", Clock::now().time_since_epoch().count());
  report.allowed_rollback = o.checkpoint_every_steps + o.rollback_slack;
  // Per ps task, per kill: the newest valid checkpoint once it was dead (what its restart must
  // restore: nothing writes that folder in between).
  std::map<int, std::vector<int64_t>> expected_restores;

  std::vector<std::string> argv = {Binary("psflow"), "run", "--progress=never",
                                   "--run_dir=" + report.run_dir};
  if (!o.emulate_network.empty()) argv.push_back("--emulate_network=" + o.emulate_network);
  argv.push_back(manifest);
  auto spawned = local::ChildProcess::Spawn(
      argv, psflow::testing::Environment({absl::StrCat(kTagVariable, "=", tag)}));
  if (!spawned.ok()) {
    report.broken.push_back(absl::StrCat("psflow run: ", spawned.status().message()));
    return report;
  }
  std::unique_ptr<local::ChildProcess> runner = *std::move(spawned);
  const pid_t runner_pid = runner->pid();
  const Clock::time_point start = Clock::now();
  std::atomic<bool> done{false};
  std::optional<local::ExitStatus> exit;
  std::thread waiter([&] {
    exit = runner->WaitWithOutput(o.timeout, &report.output);
    if (!exit) {
      runner->Signal(SIGKILL);
      exit = runner->WaitWithOutput(std::chrono::seconds(10), &report.output);
    }
    done = true;
  });

  CheckpointAuditor auditor(checkpoints);
  std::optional<Clock::time_point> origin;  // the chief initialised the ps tasks
  std::map<std::string, int64_t> highest;   // per ps task, its global step as scraped
  size_t next = 0;
  std::vector<Undo> undo;
  Clock::time_point last_scrape, last_scan;
  auto scrape = [&](const std::map<std::string, ReplicaProcess>& replicas) {
    if (!o.emulate_network.empty()) return;  // the replicas' ports are in their namespaces
    for (const auto& [name, p] : replicas) {
      if (!absl::StartsWith(name, "ps-") || p.metrics_port <= 0) continue;
      auto text = HttpGet("127.0.0.1", p.metrics_port, "/metrics", std::chrono::milliseconds(300));
      if (!text.ok()) continue;
      // 0 until the ps is initialised or restored: training steps start at 1.
      const int64_t step =
          static_cast<int64_t>(SumSamples(*text, "psflow_ps_global_step").value_or(0));
      if (step <= 0) continue;
      int64_t& high = highest[name];
      report.max_rollback = std::max(report.max_rollback, high - step);
      high = std::max(high, step);
    }
  };
  const bool paced = o.steps_per_second > 0 && o.emulate_network.empty();
  auto due = [&](const Fault& f, Clock::time_point now) {
    if (!paced) return now >= *origin + f.at;
    int64_t step = 0;
    for (const auto& [name, high] : highest) step = std::max(step, high);
    return static_cast<double>(step) >=
           1e-3 * static_cast<double>(f.at.count()) * o.steps_per_second;
  };
  auto undo_one = [&](const Undo& u) {
    if (u.fault.kind == FaultKind::kPause) {
      // Only to the process paused: killed meanwhile, its pid may be another's by now.
      for (const auto& [name, p] : FindReplicas(tag)) {
        if (p.pid == u.pid) kill(u.pid, SIGCONT);
      }
    } else if (std::string e = SetLink(runner_pid, u.fault.replica, true); !e.empty()) {
      report.broken.push_back(absl::StrCat("could not bring ", u.fault.replica, "'s link up: ", e));
    }
  };
  while (!done) {
    std::this_thread::sleep_for(kTick);
    const auto now = Clock::now();
    if (!origin && absl::StrContains(ReadWhole(report.run_dir + "/ps-0.log"), "initialised ")) {
      origin = now;
    }
    std::map<std::string, ReplicaProcess> replicas;
    if (now - last_scrape >= kScrapeEvery) {
      last_scrape = now;
      replicas = FindReplicas(tag);
      scrape(replicas);
    }
    if (now - last_scan >= kCheckpointScanEvery) {
      last_scan = now;
      auditor.Scan(report, false);
    }
    for (auto it = undo.begin(); it != undo.end();) {
      if (now < it->at) {
        ++it;
        continue;
      }
      undo_one(*it);
      it = undo.erase(it);
    }
    if (!origin || next >= o.faults.size() || !due(o.faults[next], now)) continue;
    const Fault& f = o.faults[next++];
    if (replicas.empty()) replicas = FindReplicas(tag);
    const auto target = replicas.find(f.replica);
    if (target == replicas.end()) {
      report.skipped.push_back(absl::StrCat(Describe(f), " (not running then)"));
      continue;
    }
    if (f.kind == FaultKind::kKill) {
      scrape(replicas);  // the step just before
      kill(target->second.pid, SIGKILL);
      if (absl::StartsWith(f.replica, "ps-")) {
        AwaitDeath(target->second.pid);
        expected_restores[std::atoi(f.replica.c_str() + 3)].push_back(
            NewestCheckpointStep(checkpoints, std::atoi(f.replica.c_str() + 3)));
      }
    } else if (f.kind == FaultKind::kPause) {
      kill(target->second.pid, SIGSTOP);
      undo.push_back({now + f.duration, f, target->second.pid});
    } else {
      if (std::string e = SetLink(runner_pid, f.replica, false); !e.empty()) {
        report.broken.push_back(absl::StrCat("could not partition ", f.replica, ": ", e));
        continue;
      }
      undo.push_back({now + f.duration, f, 0});
    }
    report.injected.push_back(Describe(f));
    const std::string type = f.replica.substr(0, f.replica.find('-'));
    ++report.injected_by[absl::StrCat(FaultKindName(f.kind), " ", type)];
  }
  for (const Undo& u : undo) undo_one(u);  // the job ended first: nothing stays stopped
  waiter.join();
  for (; next < o.faults.size(); ++next) {
    report.skipped.push_back(absl::StrCat(Describe(o.faults[next]), " (the job had ended)"));
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& [name, high] : highest) report.global_step = std::max(report.global_step, high);
  if (origin) {
    report.training_seconds = std::chrono::duration<double>(Clock::now() - *origin).count();
  }

  // 5. Nothing left running (and nothing stays for the next trial).
  for (const std::string& p : TaggedProcesses(tag)) {
    report.broken.push_back(absl::StrCat("left running after psflow run exited: ", p));
  }
  // 1. Succeeded.
  report.succeeded = exit && exit->ok() &&
                     absl::StrContains(report.output, absl::StrCat("job ", o.name, " Succeeded"));
  if (!report.succeeded) {
    report.broken.push_back(absl::StrCat(
        "the job did not succeed: psflow run ", exit ? exit->Describe() : "timed out", "; ",
        absl::StrJoin(psflow::testing::LinesWith(report.output, "[psflow] job "), " | ")));
  }
  // 2. Accuracy.
  report.accuracy = FinalAccuracyIn(report.run_dir);
  if (report.succeeded && !report.accuracy) {
    report.broken.push_back("no trainer reported a test_accuracy");
  }
  if (report.accuracy && o.baseline_accuracy &&
      std::abs(*report.accuracy - *o.baseline_accuracy) > o.accuracy_tolerance) {
    report.broken.push_back(absl::StrFormat("test accuracy %.4f is not within %.3f of %.4f",
                                            *report.accuracy, o.accuracy_tolerance,
                                            *o.baseline_accuracy));
  }
  // 3. The global step, as the ps logs tell it too; each restart restored the newest checkpoint.
  for (int i = 0; i < o.ps; ++i) {
    const std::string log = ReadWhole(absl::StrCat(report.run_dir, "/ps-", i, ".log"));
    const std::vector<int64_t> restores = RestoresInLog(log);
    const std::vector<int64_t>& expected = expected_restores[i];
    if (restores.size() > expected.size()) {
      report.broken.push_back(absl::StrCat("ps-", i, " restarted ", restores.size(),
                                           " times, killed ", expected.size()));
    }
    for (size_t k = 0; k < std::min(restores.size(), expected.size()); ++k) {
      if (restores[k] != kStoppedWhileStarting && restores[k] != expected[k]) {
        report.broken.push_back(absl::StrCat(
            "ps-", i, "'s restart ", k + 1, " restored ",
            restores[k] < 0 ? "no checkpoint" : absl::StrCat("global step ", restores[k]),
            " where the newest checkpoint when it was killed held ",
            expected[k] < 0 ? "none" : absl::StrCat("global step ", expected[k])));
      }
    }
    const std::vector<int64_t> steps = StepsInLog(log);
    int64_t high = 0;
    for (const int64_t s : steps) {
      report.max_rollback = std::max(report.max_rollback, high - s);
      high = std::max(high, s);
    }
  }
  if (report.max_rollback > report.allowed_rollback) {
    report.broken.push_back(absl::StrCat("a ps's global step went back by ", report.max_rollback,
                                         " steps (at most ", report.allowed_rollback, " allowed)"));
  }
  // 4. Every checkpoint reads back.
  auditor.Scan(report, true);
  return report;
}

std::string Summarize(const TrialReport& r) {
  std::string line = absl::StrFormat(
      "%s %s %.1fs acc=%s rollback=%d/%d checkpoints_read=%d temp_files=%d faults=[%s]",
      r.held() ? "HELD" : "BROKEN", r.succeeded ? "Succeeded" : "NOT-Succeeded", r.seconds,
      r.accuracy ? absl::StrFormat("%.4f", *r.accuracy) : "none", r.max_rollback,
      r.allowed_rollback, r.checkpoints_read, r.temp_files, absl::StrJoin(r.injected, ", "));
  if (!r.skipped.empty()) absl::StrAppend(&line, " skipped=[", absl::StrJoin(r.skipped, ", "), "]");
  for (const std::string& b : r.broken) absl::StrAppend(&line, "\n    broken: ", b);
  return line;
}

}  // namespace psflow::faults
