#include "operator/local/runner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/file_util.h"
#include "core/free_ports.h"
#include "core/http_get.h"
#include "core/prometheus_text.h"
#include "core/status_macros.h"
#include "operator/api/cluster_spec_builder.h"
#include "operator/api/job_policy.h"
#include "operator/local/child_process.h"
#include "operator/local/console.h"
#include "operator/local/ignored_fields.h"
#include "operator/local/local_certificates.h"
#include "operator/local/network_emulation.h"
#include "operator/local/progress_tracker.h"
#include "operator/local/replica_check.h"
#include "operator/local/restart_backoff.h"
#include "operator/local/run_folder.h"
#include "operator/local/run_summary.h"
#include "operator/local/scrape_targets.h"

namespace psflow::local {
namespace {

using Clock = std::chrono::steady_clock;
using api::ReplicaType;

constexpr int64_t kMaxLocalReplicas = 64;
// How often the replicas' /metrics are scraped and the live bar redrawn.
constexpr std::chrono::milliseconds kScrapeInterval{500};
// A replica's output: reads of 64 KiB per DrainOutput while it runs, and once it has ended; the
// longest line kept whole (longer ones are cut).
constexpr int kMaxReadsPerDrain = 16;
constexpr int kMaxReadsAtExit = 1024;
constexpr size_t kMaxLineBytes = 64 << 10;
constexpr std::chrono::seconds kPsListenWait{10};

int g_signal_pipe = -1;  // write end; the handler only writes a byte

void OnStopSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe, &b, 1);
  errno = saved;
}

// For the whole run: SIGINT/SIGTERM/SIGHUP become bytes on a pipe the supervisor polls; SIGPIPE is
// ignored (`psflow run job.yaml | head` must not kill the runner mid-job); SIGCHLD is default
// (if it were inherited as ignored, children would be reaped by the kernel and never seen to
// exit). Everything is restored on destruction.
class StopSignals {
 public:
  static absl::StatusOr<std::unique_ptr<StopSignals>> Install() {
    std::unique_ptr<StopSignals> s(new StopSignals());
    if (pipe2(s->pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
    }
    g_signal_pipe = s->pipe_[1];
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &s->old_int_);
    sigaction(SIGTERM, &sa, &s->old_term_);
    // The terminal closed: clean up as for Ctrl-C; unless SIGHUP is ignored (nohup), as it stays.
    sigaction(SIGHUP, nullptr, &s->old_hup_);
    if (s->old_hup_.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, nullptr);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &s->old_pipe_);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &dfl, &s->old_chld_);
    return s;
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    sigaction(SIGCHLD, &old_chld_, nullptr);
    g_signal_pipe = -1;
    close(pipe_[0]);
    close(pipe_[1]);
  }
  int fd() const { return pipe_[0]; }
  // True (and the signal consumed) when a stop signal arrived since the last call.
  bool Received() {
    unsigned char b;
    bool any = false;
    while (read(pipe_[0], &b, 1) == 1) any = true;
    return any;
  }

 private:
  StopSignals() = default;
  int pipe_[2] = {-1, -1};
  struct sigaction old_int_ {
  }, old_term_{}, old_hup_{}, old_pipe_{}, old_chld_{};
};

struct Replica {
  ReplicaType type = ReplicaType::kWorker;
  int index = 0;
  int position = 0;  // in JobRun::replicas_: its link's index in an emulated network
  std::string name;  // "worker-1"
  int port = 0;
  int metrics_port = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<ReplicaLog> log;
  std::string partial_line;
  bool reported_exit = false;
  bool completed = false;  // ended with exit 0 as a trainer or evaluator: never run again
  int restarts = 0;
  Clock::time_point started;  // its current (or last) run's
  int quick_runs = 0;         // runs in a row that ended within kQuickRun (restart_backoff.h)
  std::optional<Clock::time_point> restart_at;  // decided to restart, then
  int trainer = -1;      // index among the job's trainers (ProgressTracker), -1 if not one
  ReplicaReport report;  // its row in the summary
  // A trainer's steps as last scraped: its row's when it ends without a done: line.
  std::optional<double> scraped_steps;
};

// "exit 1", "signal 9"
std::string ShortExit(const ExitStatus& s) {
  return s.signal != 0 ? absl::StrCat("signal ", s.signal) : absl::StrCat("exit ", s.code);
}

Console::Display DisplayFor(const RunOptions& options) {
  switch (options.progress) {
    case RunOptions::Progress::kAlways:
      return Console::Display::kLive;
    case RunOptions::Progress::kNever:
      return Console::Display::kNone;
    case RunOptions::Progress::kAuto:
      break;
  }
  return isatty(STDOUT_FILENO) ? Console::Display::kLive : Console::Display::kPeriodic;
}

class JobRun {
 public:
  JobRun(const api::TrainingJob& job, const RunOptions& options, StopSignals& signals)
      : job_(job),
        options_(options),
        signals_(signals),
        console_(DisplayFor(options), options.progress_every),
        tracker_(job.name, 0, Clock::now()) {}

  absl::Status Plan();
  // Creates the run folder and every replica's log in it.
  absl::Status OpenLogs();
  // Writes options.prometheus_targets (when set): every replica's metrics endpoint, or none.
  absl::Status PublishScrapeTargets(bool listed) const;
  absl::Status Start();
  JobOutcome Supervise();

 private:
  void DrainOutput(Replica& r, bool final);
  // One whole line of r's output: to its log, its summary row, and stdout when verbose.
  void OnOutputLine(Replica& r, absl::string_view line);
  // r failed on its own (not stopped by us): its last lines and where its log is.
  void ReportFailure(const Replica& r);
  void ReapAndDecide();
  // Scrapes the replicas (at most every kScrapeInterval) and shows the progress; `last` scrapes
  // now and shows nothing (EndProgress shows the final figures once).
  void UpdateProgress(bool last = false);
  void StopAll(const char* why);
  absl::Status Restart(Replica& r);
  // Restarts every replica whose restart_at has come (a failure to start fails the job).
  void RestartDue();
  // With an emulated network, once before the first replica other than a ps starts: waits (at
  // most kPsListenWait) until every ps task accepts connections. A worker whose first gRPC
  // connection finds no ps listening in its namespace waits seconds (5 measured) before it
  // retries; on loopback the replicas' start-up usually hides the race.
  void WaitForPsTasks();
  // With an emulated network: checks it can be made, deletes abandoned namespaces, makes it.
  absl::Status SetUpNetwork();
  // With an emulated network: what crossed each replica's link, then the namespaces deleted.
  void TearDownNetwork();
  // Where r's ports are reached: its namespace's address, or 127.0.0.1.
  std::string Host(const Replica& r) const {
    return network_ ? network_->Address(r.position) : "127.0.0.1";
  }
  bool IsTrainer(const Replica& r) const { return api::IsTrainer(r.type); }
  std::string Say(absl::string_view text) { return absl::StrCat("[psflow] ", text); }

  const api::TrainingJob& job_;
  const RunOptions& options_;
  StopSignals& signals_;
  Console console_;
  ProgressTracker tracker_;
  std::string run_dir_;
  // Declared before replicas_: destroyed after them, once every replica process is gone.
  std::unique_ptr<NetworkEmulation> network_;
  std::unique_ptr<LocalCertificates> certificates_;  // with spec.tls.enabled (the default)
  std::vector<Replica> replicas_;
  int trainers_ = 0;  // replicas with a trainer index
  Clock::time_point start_;
  std::optional<JobOutcome> outcome_;
  std::string outcome_reason_;
  std::optional<Clock::time_point> finish_by_;  // set once the job has succeeded
  // Progress state.
  Clock::time_point last_scrape_;
  double global_step_ = 0;  // the most the ps tasks (or trainers) said, as last scraped
  int restarts_ = 0;        // across the job, against runPolicy.backoffLimit
  bool ps_waited_ = false;
};

absl::Status JobRun::Restart(Replica& r) {
  r.restart_at.reset();
  ASSIGN_OR_RETURN(r.process, ChildProcess::Spawn(r.argv, r.env));
  r.started = Clock::now();
  r.reported_exit = false;
  r.partial_line.clear();
  ++r.restarts;  // the job's count (restarts_) is the caller's: evaluators' do not count
  r.report.restarts = r.restarts;
  r.report.exit = "running";
  r.log->StartRun(absl::StrCat("[psflow] ", r.name, " restarted (restart ", r.restarts, ")"));
  return absl::OkStatus();
}

absl::Status JobRun::Plan() {
  int64_t count = 0;
  for (const auto& [type, spec] : job_.replica_specs) {
    const api::Container& c = spec.MainContainer();
    if (spec.replicas > 0 && c.command.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.replicaSpecs.", api::ReplicaTypeName(type), ": container \"", c.name,
                       "\" has no command; psflow run needs one (e.g. [psflow-worker])"));
    }
    count += spec.replicas;
  }
  if (count > kMaxLocalReplicas) {
    return absl::InvalidArgumentError(absl::StrCat("the job has ", count,
                                                   " replicas; psflow run starts at most ",
                                                   kMaxLocalReplicas, " local processes"));
  }
  ASSIGN_OR_RETURN(std::vector<int> ports, FreeLocalPorts(static_cast<int>(2 * count)));
  size_t next = 0;
  int trainers = 0;
  for (const auto& [type, spec] : job_.replica_specs) {
    for (int i = 0; i < spec.replicas; ++i) {
      Replica r;
      r.type = type;
      r.index = i;
      r.name = absl::StrCat(api::TaskTypeName(type), "-", i);
      r.port = ports[next];
      r.metrics_port = ports[next + 1];
      next += 2;
      const api::Container& c = spec.MainContainer();
      r.argv = c.command;
      r.argv.insert(r.argv.end(), c.args.begin(), c.args.end());
      r.report.name = r.name;
      r.report.exit = "not started";
      r.position = static_cast<int>(replicas_.size());
      if (api::IsTrainer(type)) r.trainer = trainers++;
      replicas_.push_back(std::move(r));
    }
  }
  trainers_ = trainers;
  RETURN_IF_ERROR(SetUpNetwork());
  if (job_.tls) {
    ASSIGN_OR_RETURN(certificates_, LocalCertificates::Create(TempDirectory(), job_.name));
  }
  const ClusterSpec cluster = api::BuildClusterSpec(job_, [this](ReplicaType type, int index) {
    for (const auto& r : replicas_) {
      if (r.type == type && r.index == index) return absl::StrCat(Host(r), ":", r.port);
    }
    return std::string();
  });
  const std::string run_tag = absl::StrCat(absl::Hex(std::random_device()(), absl::kZeroPad8));
  const std::map<std::string, std::string> inherited = OwnEnvironment();
  for (Replica& r : replicas_) {
    std::map<std::string, std::string> env =
        ReplicaEnvironment(inherited, job_, r.type, r.index, cluster);
    env["PSFLOW_METRICS_PORT"] = absl::StrCat(r.metrics_port);
    // Every process is on this host: a ps serves its workers through shared memory too, at a
    // name of Linux's abstract namespace (core/shm_stream.h) unique to the run and the task (one
    // the runner's own environment has is replaced). Not across an emulated network (its
    // workers are in other network namespaces and could not reach it anyway: they would use
    // TCP), nor where the manifest's container env sets the variable (empty: not).
    const auto& own_env = job_.replica_specs.at(r.type).MainContainer().env;
    const bool set_by_manifest = absl::c_any_of(own_env, [](const api::EnvVar& e) {
      return e.name == "PSFLOW_BULK_SOCKET" && !e.value_from;  // valueFrom: not set here
    });
    if (r.type == ReplicaType::kPS && !network_ && !set_by_manifest) {
      env["PSFLOW_BULK_SOCKET"] =
          absl::StrCat("@psflow-run-", getpid(), "-", run_tag, "-ps-", r.index);
    }
    for (const auto& [name, value] : env) r.env.push_back(absl::StrCat(name, "=", value));
    if (certificates_) {
      std::vector<std::string> ips = {Host(r)};
      if (ips[0] != "127.0.0.1") ips.push_back("127.0.0.1");
      ASSIGN_OR_RETURN(const std::vector<std::string> flags,
                       certificates_->AddReplica(r.name, ips));
      r.argv.insert(r.argv.end(), flags.begin(), flags.end());
    }
    if (network_) r.argv = network_->Wrap(r.position, r.argv);
  }
  return absl::OkStatus();
}

absl::Status JobRun::SetUpNetwork() {
  if (!options_.emulate_network || replicas_.empty()) return absl::OkStatus();
  if (!options_.prometheus_targets.empty()) {
    return absl::InvalidArgumentError(
        "--prometheus_targets cannot be used with --emulate_network: Prometheus, in this "
        "machine's own network namespace, cannot reach the replicas' namespaces");
  }
  RETURN_IF_ERROR(NetworkEmulation::CheckPrerequisites());
  ASSIGN_OR_RETURN(const std::vector<std::string> abandoned, NetworkEmulation::RemoveAbandoned());
  if (!abandoned.empty()) {
    console_.Line(Say(absl::StrCat("removed ", abandoned.size(),
                                   " network namespaces left by an earlier psflow run that was "
                                   "killed: ",
                                   absl::StrJoin(abandoned, " "))));
  }
  std::vector<std::string> names;
  for (const Replica& r : replicas_) names.push_back(r.name);
  ASSIGN_OR_RETURN(network_, NetworkEmulation::Create(*options_.emulate_network, names));
  console_.Line(Say(absl::StrCat(
      "network: emulated, ", DescribeLinkShape(*options_.emulate_network),
      ", each replica in its own namespace (", network_->prefix(), "*, replicas at ",
      network_->Address(0), "..", network_->Address(static_cast<int>(replicas_.size()) - 1), ")")));
  return absl::OkStatus();
}

void JobRun::TearDownNetwork() {
  if (!network_) return;
  for (const Replica& r : replicas_) {
    auto bytes = network_->Counters(r.position);
    if (!bytes.ok()) {
      console_.Line(Say(absl::StrCat("network: ", r.name, ": ", bytes.status().message())));
      continue;
    }
    console_.Line(Say(absl::StrCat("network: ", r.name, " sent_bytes=", bytes->sent,
                                   " received_bytes=", bytes->received)));
  }
  const absl::Status removed = network_->Teardown();
  console_.Line(Say(removed.ok()
                        ? absl::StrCat("network: namespaces ", network_->prefix(), "* removed")
                        : absl::StrCat("network: ", removed.message())));
  network_.reset();
}

absl::Status JobRun::OpenLogs() {
  ASSIGN_OR_RETURN(run_dir_, CreateRunFolder(options_.run_dir, job_.name, absl::Now()));
  for (Replica& r : replicas_) {
    ASSIGN_OR_RETURN(r.log, ReplicaLog::Open(absl::StrCat(run_dir_, "/", r.name, ".log")));
  }
  // spec.modelFile: the run folder's model.yaml, as the operator's ConfigMap.
  if (!job_.model_file.empty()) {
    const std::string model = absl::StrCat(run_dir_, "/model.yaml");
    RETURN_IF_ERROR(WriteFileAtomically(model, job_.model_file));
    for (Replica& r : replicas_) {
      if (r.type != ReplicaType::kPS) r.argv.push_back(absl::StrCat("--model_file=", model));
    }
  }
  return absl::OkStatus();
}

absl::Status JobRun::PublishScrapeTargets(bool listed) const {
  if (options_.prometheus_targets.empty()) return absl::OkStatus();
  std::vector<ScrapeTarget> targets;
  for (const Replica& r : replicas_) {
    if (!listed) break;
    targets.push_back({absl::StrCat("127.0.0.1:", r.metrics_port), job_.name,
                       std::string(api::TaskTypeName(r.type)), r.index});
  }
  absl::Status written = WriteFileAtomically(options_.prometheus_targets, FileSdJson(targets));
  if (written.ok()) return written;
  return absl::Status(written.code(), absl::StrCat("--prometheus_targets: ", written.message()));
}

absl::Status JobRun::Start() {
  start_ = Clock::now();
  last_scrape_ = start_;
  tracker_ = ProgressTracker(job_.name, trainers_, start_);
  // replica_specs is ordered Chief, PS, Worker, Evaluator; start the ps tasks first so the
  // workers' first connection usually succeeds.
  std::vector<Replica*> order;
  for (auto& r : replicas_) {
    if (r.type == ReplicaType::kPS) order.push_back(&r);
  }
  for (auto& r : replicas_) {
    if (r.type != ReplicaType::kPS) order.push_back(&r);
  }
  console_.Line(Say(absl::StrFormat("job %s: starting %d replicas; their logs: %s/", job_.name,
                                    replicas_.size(), run_dir_)));
  console_.Line(Say(certificates_ != nullptr
                        ? absl::StrCat("mutual TLS between the replicas; their certificates: ",
                                       certificates_->dir(), "/ (removed when the run ends)")
                        : std::string("spec.tls.enabled is false: the replicas talk to the ps "
                                      "tasks in plaintext, unauthenticated")));
  if (job_.run_policy.scheduling.gang != api::GangScheduler::kNone) {
    console_.Line(Say(absl::StrCat("spec.runPolicy.schedulingPolicy (gang ",
                                   api::GangSchedulerName(job_.run_policy.scheduling.gang),
                                   ") is for a cluster's gang scheduler: ignored here")));
  }
  if (job_.shared_memory.enabled) {
    console_.Line(
        Say(absl::StrCat("spec.sharedMemory is for a cluster's nodes: ignored here, where ",
                         network_ ? "the emulated network carries every byte"
                                  : "each ps already serves the workers through shared memory")));
  }
  for (const auto& [type, spec] : job_.replica_specs) {
    for (const api::FailureRule& rule : spec.failure_rules) {
      if (rule.on_pod_conditions.empty()) continue;
      console_.Line(Say(absl::StrCat(
          "spec.replicaSpecs.", api::ReplicaTypeName(type),
          ".podFailurePolicy: rules onPodConditions never match here (processes have no pod "
          "conditions); rules onExitCodes do")));
      break;
    }
  }
  for (const auto& [type, spec] : job_.replica_specs) {
    if (spec.replicas == 0) continue;
    for (const std::string& line : IgnoredContainerFields(spec)) {
      console_.Line(
          Say(absl::StrCat("spec.replicaSpecs.", api::ReplicaTypeName(type), ": ", line)));
    }
  }
  for (Replica* r : order) {
    if (network_ && r->type != ReplicaType::kPS) WaitForPsTasks();
    auto p = ChildProcess::Spawn(r->argv, r->env);
    if (!p.ok()) {
      StopAll("start failed");
      return absl::Status(p.status().code(), absl::StrCat(r->name, ": ", p.status().message()));
    }
    r->process = *std::move(p);
    r->started = Clock::now();
    r->report.exit = "running";
  }
  return absl::OkStatus();
}

void JobRun::WaitForPsTasks() {
  if (ps_waited_) return;
  ps_waited_ = true;
  const auto give_up = Clock::now() + kPsListenWait;
  auto listening = [](const std::string& host, int port) {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    return fd.valid() && inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1 &&
           connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  };
  network_
      ->RunInBridge([&] {
        for (const Replica& r : replicas_) {
          if (r.type != ReplicaType::kPS) continue;
          // A ps that exited is the supervisor's to report; one slow to listen is waited for.
          while (!listening(Host(r), r.port) && Clock::now() < give_up &&
                 !r.process->exit_status() && !r.process->Poll()) {
            usleep(20000);
          }
        }
      })
      .IgnoreError();  // the workers then start at once, and retry
}

void JobRun::OnOutputLine(Replica& r, absl::string_view line) {
  const int64_t lost_before = r.log->lines_lost();
  r.log->Append(line);
  if (lost_before == 0 && r.log->lines_lost() > 0) {  // said once per log
    console_.Line(Say(absl::StrCat(r.name, "'s log cannot be written (", r.log->write_error(),
                                   "): its lines from here on are lost; the run goes on")));
  }
  if (ObserveLogLine(line, r.report) && r.trainer >= 0 && r.report.steps) {
    tracker_.Finished(r.trainer, *r.report.steps, r.report.examples_per_sec,
                      r.report.words_per_sec);
  }
  if (options_.verbose) console_.Line(absl::StrCat("[", r.name, "] ", line));
}

void JobRun::ReportFailure(const Replica& r) {
  if (options_.verbose) {  // its lines were shown as they came
    console_.Line(Say(absl::StrCat(r.name, "'s log: ", r.log->path())));
    return;
  }
  const std::vector<std::string> tail = r.log->Tail();
  console_.Line(Say(absl::StrCat(r.name, "'s log ends (", r.log->path(), "):")));
  for (const std::string& line : tail) {
    // A long line shows its start (the log file has it in pieces of kMaxLineBytes).
    constexpr size_t kShown = 1000;
    console_.Line(absl::StrCat(
        "[", r.name, "] ", absl::string_view(line).substr(0, kShown),
        line.size() > kShown ? absl::StrCat(" [... ", line.size() - kShown, " more bytes]") : ""));
  }
}

void JobRun::DrainOutput(Replica& r, bool final) {
  if (r.process == nullptr || r.process->output_fd() < 0) return;
  char buf[65536];
  // A replica writing without pause must not keep the loop from signals, exits and deadlines:
  // a few reads per call while it runs (poll comes back at once), more once it has ended (a child
  // of its own may still hold the pipe).
  const int max_reads = final ? kMaxReadsAtExit : kMaxReadsPerDrain;
  for (int reads = 0; reads < max_reads; ++reads) {
    const ssize_t n = read(r.process->output_fd(), buf, sizeof(buf));
    if (n > 0) {
      // What was there before holds no newline: look in what came. A line longer than
      // kMaxLineBytes is cut into pieces of that size, so output without newlines costs bounded
      // memory and time.
      size_t start = 0;
      size_t scan = r.partial_line.size();
      r.partial_line.append(buf, static_cast<size_t>(n));
      const absl::string_view all(r.partial_line);
      for (;;) {
        const size_t nl = all.find('\n', scan);
        const size_t end = nl == absl::string_view::npos ? all.size() : nl;
        // Strictly longer: a piece cut never ends just before its newline (no empty line after).
        if (end - start > kMaxLineBytes) {
          OnOutputLine(r, all.substr(start, kMaxLineBytes));
          start = scan = start + kMaxLineBytes;
          continue;
        }
        if (nl == absl::string_view::npos) break;
        OnOutputLine(r, all.substr(start, nl - start));
        start = scan = nl + 1;
      }
      r.partial_line.erase(0, start);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || final) {  // EOF, or the process is gone: flush what is left
      if (!r.partial_line.empty()) OnOutputLine(r, r.partial_line);
      r.partial_line.clear();
      if (n == 0) r.process->CloseOutput();
    }
    return;
  }
  if (final && !r.partial_line.empty()) {  // still writing (a child of its own): what came is kept
    OnOutputLine(r, r.partial_line);
    r.partial_line.clear();
  }
}

void JobRun::ReapAndDecide() {
  for (Replica& r : replicas_) {
    if (r.process == nullptr) continue;
    const auto status = r.process->Poll();
    if (!status || r.reported_exit) continue;
    r.reported_exit = true;
    DrainOutput(r, /*final=*/true);
    r.report.exit = ShortExit(*status);
    console_.Line(Say(absl::StrCat(r.name, " exited: ", status->Describe())));
    if (!status->ok()) ReportFailure(r);
    if (outcome_) continue;
    const api::ReplicaExit exit{
        .exit_code = status->signal != 0 ? 128 + status->signal : status->code,
        .conditions = {}};  // a process has no pod conditions
    const api::ReplicaOutcome outcome = api::OnReplicaEnd(job_, r.type, exit);
    switch (outcome) {
      case api::ReplicaOutcome::kCompleted:
        r.completed = true;
        break;
      case api::ReplicaOutcome::kRestart:
      case api::ReplicaOutcome::kRestartUncounted: {
        const int limit = api::BackoffLimit(job_);
        const std::string rule = api::FailureRuleReason(job_, r.type, exit);
        const bool counted =
            api::CountsAgainstBackoff(r.type) && outcome == api::ReplicaOutcome::kRestart;
        if (counted && restarts_ >= limit) {
          outcome_ = JobOutcome::kFailed;
          outcome_reason_ =
              absl::StrCat(r.name, " failed (", status->Describe(), "); restart ", restarts_ + 1,
                           " of the job's replicas exceeds runPolicy.backoffLimit ", limit);
          break;
        }
        // Restarted by RestartDue, at once or, after quick failures in a row, a little later.
        r.quick_runs = Clock::now() - r.started < kQuickRun ? r.quick_runs + 1 : 0;
        const std::chrono::milliseconds delay = RestartDelay(r.quick_runs);
        r.restart_at = Clock::now() + delay;
        if (counted) ++restarts_;
        console_.Line(Say(absl::StrCat(
            "restarting ", r.name,
            delay.count() > 0 ? absl::StrFormat(" in %.2fs", delay.count() / 1e3) : std::string(),
            " (",
            counted         ? absl::StrCat("restart ", restarts_, " of at most ", limit)
            : !rule.empty() ? absl::StrCat(rule, ": not counted against backoffLimit")
                            : std::string("an evaluator: not counted against backoffLimit"),
            rule.empty()
                ? absl::StrCat(", restartPolicy ",
                               api::RestartPolicyName(job_.replica_specs.at(r.type).restart_policy))
                : std::string(),
            ")")));
        break;
      }
      case api::ReplicaOutcome::kFailJob: {
        outcome_ = JobOutcome::kFailed;
        const std::string rule = api::FailureRuleReason(job_, r.type, exit);
        outcome_reason_ =
            !rule.empty() ? absl::StrCat(r.name, " failed (", status->Describe(), "); ", rule,
                                         " fails the job")
            : r.type == ReplicaType::kPS
                ? absl::StrCat(r.name, " exited before the job finished (", status->Describe(), ")")
                : absl::StrCat(r.name, " failed (", status->Describe(), ")");
        break;
      }
      case api::ReplicaOutcome::kLeftEnded:
        console_.Line(Say(absl::StrCat(r.name, " failed (", status->Describe(),
                                       "); the job goes on without it (an evaluator does not "
                                       "decide the job's outcome)")));
        break;
    }
  }
  if (!outcome_) {
    std::set<std::pair<ReplicaType, int>> completed;
    for (const Replica& r : replicas_) {
      if (r.completed) completed.insert({r.type, r.index});
    }
    if (api::JobSucceeded(job_, [&](ReplicaType type, int index) {
          return completed.count({type, index}) > 0;
        })) {
      outcome_ = JobOutcome::kSucceeded;
      outcome_reason_ = api::SuccessReason(job_);
    }
  }
  if (outcome_ == JobOutcome::kSucceeded && !finish_by_) {
    finish_by_ = Clock::now() + absl::ToChronoSeconds(api::FinishGrace(job_));
  }
}

void JobRun::RestartDue() {
  for (Replica& r : replicas_) {
    if (outcome_ == JobOutcome::kFailed) return;
    if (!r.restart_at || Clock::now() < *r.restart_at) continue;
    if (absl::Status s = Restart(r); !s.ok()) {
      outcome_ = JobOutcome::kFailed;
      outcome_reason_ = absl::StrCat(r.name, " could not be restarted: ", s.message());
    }
  }
}

void JobRun::UpdateProgress(bool last) {
  const auto now = Clock::now();
  if (!last && now - last_scrape_ < kScrapeInterval) return;
  last_scrape_ = now;
  std::vector<std::optional<std::string>> texts(replicas_.size());
  auto scrape = [&] {
    for (size_t i = 0; i < replicas_.size(); ++i) {
      const Replica& r = replicas_[i];
      const bool alive = r.process != nullptr && !r.process->exit_status();
      if (!alive || (r.type != ReplicaType::kPS && r.trainer < 0)) continue;
      auto text = HttpGet(Host(r), r.metrics_port, "/metrics", std::chrono::milliseconds(300));
      if (text.ok()) texts[i] = *std::move(text);
    }
  };
  if (network_) {
    // The replicas are reached from their bridge's namespace; this thread stays in its own.
    if (absl::Status s = network_->RunInBridge(scrape); !s.ok()) console_.Line(Say(s.message()));
  } else {
    scrape();
  }
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (!texts[i]) continue;
    Replica& r = replicas_[i];
    const std::string& text = *texts[i];
    if (r.type == ReplicaType::kPS) {
      global_step_ = std::max(global_step_, SumSamples(text, "psflow_ps_global_step").value_or(0));
      continue;
    }
    // A trainer's view of the global step: the job's own when there is no ps (a worker alone).
    global_step_ =
        std::max(global_step_, SumSamples(text, "psflow_worker_global_step").value_or(0));
    TrainerFigures f;
    f.steps = SumSamples(text, "psflow_worker_steps_total").value_or(0);
    f.examples = SumSamples(text, "psflow_worker_examples_total").value_or(0);
    f.words = SumSamples(text, "psflow_worker_words_total").value_or(0);
    f.loss = SumSamples(text, "psflow_worker_loss");
    f.train_steps = SumSamples(text, "psflow_worker_train_steps");
    if (f.train_steps == 0.0) f.train_steps.reset();  // not set yet: training has not started
    tracker_.Update(r.trainer, f);
    r.scraped_steps = f.steps;
  }
  if (!last) console_.Progress(tracker_.Snapshot(now));
}

void JobRun::StopAll(const char* why) {
  bool any = false;
  for (Replica& r : replicas_) {
    if (r.process != nullptr && !r.process->Poll()) {
      r.process->Signal(SIGTERM);
      any = true;
    }
  }
  if (!any) return;
  console_.Line(Say(absl::StrCat("stopping the remaining replicas: ", why)));
  const auto kill_at = Clock::now() + options_.stop_grace;
  for (;;) {
    bool alive = false;
    for (Replica& r : replicas_) {
      if (r.process == nullptr) continue;
      DrainOutput(r, false);
      if (!r.process->Poll()) alive = true;
    }
    if (!alive) break;
    if (Clock::now() >= kill_at || signals_.Received()) {  // a second Ctrl-C: no more waiting
      for (Replica& r : replicas_) {
        if (r.process != nullptr) r.process->Signal(SIGKILL);
      }
    }
    usleep(20000);
  }
  for (Replica& r : replicas_) {
    if (r.process == nullptr || r.reported_exit) continue;
    r.reported_exit = true;
    DrainOutput(r, /*final=*/true);
    r.report.exit = StoppedExit(r.process->exit_status()->code, r.process->exit_status()->signal);
    console_.Line(Say(absl::StrCat(r.name, " stopped: ", r.process->exit_status()->Describe())));
  }
}

JobOutcome JobRun::Supervise() {
  bool interrupted = false;
  const std::optional<absl::Duration> active_deadline = api::ActiveDeadline(job_);
  const Clock::time_point deadline = active_deadline
                                         ? start_ + absl::ToChronoMilliseconds(*active_deadline)
                                         : Clock::time_point::max();
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({signals_.fd(), POLLIN, 0});
    for (const Replica& r : replicas_) {
      if (r.process != nullptr && r.process->output_fd() >= 0) {
        fds.push_back({r.process->output_fd(), POLLIN, 0});
      }
    }
    poll(fds.data(), fds.size(), 200);
    if ((fds[0].revents & POLLIN) && signals_.Received()) {
      interrupted = true;
      break;
    }
    for (Replica& r : replicas_) DrainOutput(r, false);
    ReapAndDecide();
    RestartDue();
    if (outcome_ == JobOutcome::kFailed) break;
    if (outcome_ == JobOutcome::kSucceeded) {
      const bool trainers_left = absl::c_any_of(replicas_, [this](const Replica& r) {
        return IsTrainer(r) && !r.process->exit_status();
      });
      if (!trainers_left || Clock::now() >= *finish_by_) break;
    }
    if (Clock::now() >= deadline) {
      outcome_ = JobOutcome::kFailed;
      outcome_reason_ = absl::StrCat("runPolicy.activeDeadlineSeconds (",
                                     *job_.run_policy.active_deadline_seconds, "s) passed");
      break;
    }
    UpdateProgress();
  }
  // A last look at the ps before it stops, for the summary.
  UpdateProgress(/*last=*/true);
  console_.EndProgress(tracker_.Snapshot(Clock::now()));
  if (interrupted) {
    outcome_ = JobOutcome::kInterrupted;
    outcome_reason_ = "interrupted";
  }
  // Unlisted before they stop: Prometheus drops the targets rather than alert on them.
  if (absl::Status s = PublishScrapeTargets(/*listed=*/false); !s.ok()) {
    console_.Line(Say(s.message()));
  }
  StopAll(outcome_reason_.c_str());
  TearDownNetwork();
  const char* state = *outcome_ == JobOutcome::kSucceeded ? "Succeeded"
                      : *outcome_ == JobOutcome::kFailed  ? "Failed"
                                                          : "Interrupted";
  std::vector<ReplicaReport> reports;
  double global_step = global_step_;
  for (const Replica& r : replicas_) {
    // What the ps tasks and workers said last, for a run too short to be scraped.
    global_step = std::max(
        {global_step, r.report.ps_global_step.value_or(0), r.report.global_step.value_or(0)});
    reports.push_back(r.report);
    // Stopped before its done: line, a trainer's steps are the last scraped.
    if (!r.report.steps) reports.back().steps = r.scraped_steps;
  }
  WriteAll(STDOUT_FILENO,
           absl::StrCat("\n", FormatSummaryTable(reports, isatty(STDOUT_FILENO)), "\n"));
  console_.Line(Say(absl::StrFormat(
      "job %s %s after %.1fs: %s (global step %.0f)", job_.name, state,
      std::chrono::duration<double>(Clock::now() - start_).count(), outcome_reason_, global_step)));
  console_.Line(Say(absl::StrCat("replica logs: ", run_dir_, "/")));
  return *outcome_;
}

}  // namespace

absl::StatusOr<JobOutcome> RunLocally(const api::TrainingJob& job, const RunOptions& options) {
  if (job.run_policy.suspend) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.name, " is suspended (spec.runPolicy.suspend: true)"));
  }
  // Each replica type's flags, checked by the program that would refuse them, before anything
  // starts: a mistyped flag is one line now, not the backoff limit's restarts later. Before the
  // stop signals are taken: a Ctrl-C meanwhile ends psflow (and its checks) at once.
  const std::string refusal = FirstRefusal(
      CheckReplicas(job, {.inherited = OwnEnvironment(), .temp_dir = TempDirectory()}));
  if (!refusal.empty()) return absl::InvalidArgumentError(refusal);
  ASSIGN_OR_RETURN(std::unique_ptr<StopSignals> signals, StopSignals::Install());
  JobRun run(job, options, *signals);
  RETURN_IF_ERROR(run.Plan());
  // The targets file first: a path that cannot be written leaves no empty run folder behind.
  RETURN_IF_ERROR(run.PublishScrapeTargets(/*listed=*/true));
  absl::Status started = run.OpenLogs();
  if (started.ok()) started = run.Start();
  if (!started.ok()) {
    run.PublishScrapeTargets(/*listed=*/false).IgnoreError();  // nothing runs: best effort
    return started;
  }
  return run.Supervise();
}

}  // namespace psflow::local
