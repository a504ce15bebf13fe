// bench_operator_scale: how psflow-operator copes with many TrainingJobs at once.
//
// Runs the real psflow-operator binary against an API server, creates --jobs TrainingJobs of
// 1 ps + --workers_per_job workers at once (TLS on, the default; --network_policy opts them in
// to a NetworkPolicy), and measures
//   - time from the burst until each job has all its pods (p50, p99, max) and until every job is
//     Running;
//   - the operator's API requests per job (all verbs but watch), by verb, from its own
//     psflow_operator_api_requests_total;
//   - the operator's RSS at start, its peak while working (VmHWM) and at the end;
//   - its requests per second while idle (after every job runs, over --idle_s seconds);
//   - with --sigterm_after_s, how long it takes to exit after SIGTERM in the middle of the burst.
// --apiserver=real: a real kube-apiserver + etcd + kube-controller-manager (tests/control_plane:
// the one PSFLOW_CONTROL_PLANE_DIR names, else one started for the run from PSFLOW_KUBE_ASSETS
// or ../shared/kube), the jobs in a namespace of their own. --apiserver=test: the test API server
// (tests/kube) in this process. The bench plays the kubelet: every new pod is marked Running.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/command_line.h"
#include "core/http_get.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "operator/local/child_process.h"
#include "tests/control_plane/control_plane.h"
#include "tests/kube/memory_kube_client.h"
#include "tests/kube/object_store.h"
#include "tests/kube/pod_status.h"
#include "tests/kube/test_api_server.h"

ABSL_FLAG(std::string, apiserver, "real", "real (kube-apiserver + etcd) or test (tests/kube)");
ABSL_FLAG(int, jobs, 500, "TrainingJobs created at once");
ABSL_FLAG(int, workers_per_job, 4, "Worker replicas per job (plus 1 ps)");
ABSL_FLAG(bool, network_policy, true,
          "Jobs opt in to spec.networkPolicy (TLS is on: the default), as a careful user's are");
ABSL_FLAG(double, qps, -1, "The operator's --qps (-1: its default)");
ABSL_FLAG(int, burst, -1, "The operator's --burst (-1: its default)");
ABSL_FLAG(int, operator_workers, 4, "The operator's --workers");
ABSL_FLAG(int, idle_s, 10, "Seconds of idle measurement");
ABSL_FLAG(double, sigterm_after_s, 0,
          "When > 0: SIGTERM the operator this long after the burst and time its exit");
ABSL_FLAG(std::string, operator_binary, "", "psflow-operator (default: beside this binary)");

namespace {

using psflow::kube::Json;
using Clock = std::chrono::steady_clock;
namespace kube = psflow::kube;

std::string SelfDir() {
  return std::filesystem::canonical("/proc/self/exe").parent_path().string();
}

// VmHWM / VmRSS of `pid` in MiB.
double ProcStatusMiB(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    double kib = 0;
    std::string digits;
    for (char c : line) {
      if (c >= '0' && c <= '9') digits += c;
    }
    if (absl::SimpleAtod(digits, &kib)) return kib / 1024.0;
  }
  return -1;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

// Runs f(0..n-1) on `threads` threads.
void ParallelFor(int n, int threads, const std::function<void(int)>& f) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) f(i);
    });
  }
  for (std::thread& t : pool) t.join();
}

// The API server the operator runs against, as the bench uses it.
class Cluster {
 public:
  virtual ~Cluster() = default;
  virtual std::string kubeconfig() const = 0;
  virtual std::string ns() const = 0;
  virtual kube::KubeClient& client() = 0;
  virtual std::string Describe() const = 0;
};

class TestCluster final : public Cluster {
 public:
  static std::unique_ptr<TestCluster> Start(const std::string& dir) {
    auto cluster = std::unique_ptr<TestCluster>(new TestCluster(dir));
    auto server = psflow::kubetest::TestApiServer::Start(&cluster->store_, {});
    if (!server.ok()) {
      std::fprintf(stderr, "bench_operator_scale: %s\n", server.status().ToString().c_str());
      return nullptr;
    }
    cluster->server_ = *std::move(server);
    if (!cluster->server_->WriteKubeconfig(cluster->kubeconfig()).ok()) return nullptr;
    return cluster;
  }
  std::string kubeconfig() const override { return dir_ + "/kubeconfig"; }
  std::string ns() const override { return "default"; }
  kube::KubeClient& client() override { return client_; }
  std::string Describe() const override {
    return "the test API server (tests/kube, HTTP on loopback, in the bench's process)";
  }

 private:
  explicit TestCluster(std::string dir)
      : dir_(std::move(dir)), store_(Options()), client_(&store_) {
    store_.RegisterBuiltins();
    store_.RegisterResource(kube::TrainingJobs(), true);
  }
  static psflow::kubetest::ObjectStore::Options Options() {
    psflow::kubetest::ObjectStore::Options options;
    options.history_window = 200000;
    return options;
  }
  std::string dir_;
  psflow::kubetest::ObjectStore store_;
  psflow::kubetest::MemoryKubeClient client_;
  std::unique_ptr<psflow::kubetest::TestApiServer> server_;
};

class RealCluster final : public Cluster {
 public:
  // The control plane of PSFLOW_CONTROL_PLANE_DIR, else one started in `dir` for the run.
  static std::unique_ptr<RealCluster> Start(const std::string& dir) {
    auto cluster = std::unique_ptr<RealCluster>(new RealCluster());
    if (std::getenv("PSFLOW_CONTROL_PLANE_DIR") == nullptr) {
      cluster->started_dir_ = dir + "/control-plane";
      const std::string command = absl::StrCat(
          PSFLOW_SOURCE_DIR, "/tests/control_plane/control_plane.sh start ", cluster->started_dir_,
          " --apply ", PSFLOW_SOURCE_DIR, "/deploy/crd/trainingjobs.psflow.io.yaml");
      if (std::system(command.c_str()) != 0) return nullptr;
      setenv("PSFLOW_CONTROL_PLANE_DIR", cluster->started_dir_.c_str(), 1);
    }
    auto plane = psflow::kubereal::ControlPlane::Get();
    if (!plane.ok()) {
      std::fprintf(stderr, "bench_operator_scale: %s\n", plane.status().ToString().c_str());
      return nullptr;
    }
    cluster->plane_ = std::make_unique<psflow::kubereal::ControlPlane>(*plane);
    auto client = cluster->plane_->AdminClient();
    if (!client.ok()) return nullptr;
    cluster->client_ = *std::move(client);
    auto ns = psflow::kubereal::TestNamespace::Create(*cluster->client_, "bench");
    if (!ns.ok()) {
      std::fprintf(stderr, "bench_operator_scale: %s\n", ns.status().ToString().c_str());
      return nullptr;
    }
    cluster->namespace_ = *std::move(ns);
    return cluster;
  }
  ~RealCluster() override {
    namespace_.reset();
    if (!started_dir_.empty()) {
      std::system(absl::StrCat(PSFLOW_SOURCE_DIR, "/tests/control_plane/control_plane.sh stop ",
                               started_dir_, " >/dev/null")
                      .c_str());
    }
  }
  std::string kubeconfig() const override { return plane_->kubeconfig(); }
  std::string ns() const override { return namespace_->name(); }
  kube::KubeClient& client() override { return *client_; }
  std::string Describe() const override {
    return "a real kube-apiserver v1.26 + etcd 3.4 + kube-controller-manager (tests/control_plane, "
           "TLS on loopback)";
  }

 private:
  RealCluster() = default;
  std::string started_dir_;
  std::unique_ptr<psflow::kubereal::ControlPlane> plane_;
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<psflow::kubereal::TestNamespace> namespace_;
};

// Plays the kubelet for the bench, as one does: a watch on the namespace's pods notes when each
// job's last pod appears, and a few threads mark every new pod Running through pods/status.
class BenchKubelet {
 public:
  BenchKubelet(kube::KubeClient& client, std::string ns, int pods_per_job, Clock::time_point start)
      : client_(client), ns_(std::move(ns)), pods_per_job_(pods_per_job), start_(start) {
    watcher_ = std::jthread([this](std::stop_token stop) { Watch(stop); });
    for (int i = 0; i < 4; ++i) {
      runners_.emplace_back([this](std::stop_token stop) { Run(stop); });
    }
  }
  ~BenchKubelet() {
    watcher_.request_stop();
    for (auto& r : runners_) r.request_stop();
    cv_.notify_all();
  }
  // Seconds from the start until each job had all its pods, in the order they completed.
  std::vector<double> JobSeconds() {
    std::lock_guard<std::mutex> lock(mu_);
    return job_seconds_;
  }

 private:
  void Watch(std::stop_token stop) {
    kube::ListOptions options;
    options.label_selector = "psflow.io/job-name";
    std::string version;
    while (!stop.stop_requested()) {
      if (version.empty()) {
        auto list = client_.List(kube::Pods(), ns_, options);
        if (!list.ok()) continue;
        for (const Json& pod : list->items) Saw(pod);
        version = list->resource_version;
      }
      options.resource_version = version;
      options.timeout_seconds = 60;
      absl::Status s =
          client_.Watch(kube::Pods(), ns_, options, stop, [&](const kube::WatchEvent& e) {
            if (const std::string v = kube::ResourceVersion(e.object); !v.empty()) version = v;
            if (e.type == kube::WatchEventType::kAdded) Saw(e.object);
          });
      if (s.code() == absl::StatusCode::kOutOfRange) version.clear();  // 410: list again
    }
  }
  void Saw(const Json& pod) {
    const double now = std::chrono::duration<double>(Clock::now() - start_).count();
    std::lock_guard<std::mutex> lock(mu_);
    if (!seen_.insert(kube::Name(pod)).second) return;
    if (++pods_of_[kube::Label(pod, "psflow.io/job-name")] == pods_per_job_) {
      job_seconds_.push_back(now);
    }
    if (kube::StringAt(pod, "status", "phase") != "Running") pending_.push_back(pod);
    cv_.notify_one();
  }
  void Run(std::stop_token stop) {
    while (true) {
      Json pod;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, stop, [&] { return !pending_.empty(); });
        if (stop.stop_requested()) return;
        pod = std::move(pending_.front());
        pending_.pop_front();
      }
      for (int attempt = 0; attempt < 5; ++attempt) {
        auto status = psflow::kubetest::PodStatusForPhase(pod, "Running", 0, "", absl::Now());
        if (!status.ok()) break;
        pod["status"] = *std::move(status);
        if (client_.UpdateStatus(kube::Pods(), ns_, pod).ok()) break;
        auto fresh = client_.Get(kube::Pods(), ns_, kube::Name(pod));  // a conflict: read again
        if (!fresh.ok()) break;
        pod = *std::move(fresh);
      }
    }
  }

  kube::KubeClient& client_;
  const std::string ns_;
  const int pods_per_job_;
  const Clock::time_point start_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::set<std::string> seen_;
  std::map<std::string, int> pods_of_;
  std::vector<double> job_seconds_;
  std::deque<Json> pending_;
  std::vector<std::jthread> runners_;
  std::jthread watcher_;
};

Json MakeJob(int j, int workers, bool network_policy) {
  auto replica = [](int n, const char* image) {
    return Json{
        {"replicas", n},
        {"restartPolicy", "OnFailure"},
        {"template",
         {{"spec", {{"containers", Json::array({{{"name", "psflow"}, {"image", image}}})}}}}}};
  };
  Json job = {{"apiVersion", "psflow.io/v1alpha1"},
              {"kind", "TrainingJob"},
              {"metadata", {{"name", absl::StrCat("job-", j)}}},
              {"spec",
               {{"replicaSpecs",
                 {{"PS", replica(1, "psflow/ps:0.1.0")},
                  {"Worker", replica(workers, "psflow/worker:0.1.0")}}}}}};
  if (network_policy) job["spec"]["networkPolicy"] = {{"enabled", true}};
  return job;
}

// The operator's own count of its API requests by verb, from its /metrics.
std::map<std::string, double> RequestsByVerb(int metrics_port) {
  std::map<std::string, double> out;
  auto text = psflow::HttpGet("127.0.0.1", metrics_port, "/metrics", std::chrono::seconds(5));
  if (!text.ok()) return out;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::StartsWith(line, "psflow_operator_api_requests_total{")) continue;
    const size_t verb = line.find("verb=\"");
    const size_t space = line.rfind(' ');
    double value = 0;
    if (verb == absl::string_view::npos || space == absl::string_view::npos ||
        !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    const size_t begin = verb + 6;
    out[std::string(line.substr(begin, line.find('"', begin) - begin))] += value;
  }
  return out;
}

double NonWatch(const std::map<std::string, double>& by_verb) {
  double n = 0;
  for (const auto& [verb, count] : by_verb) n += verb == "watch" ? 0 : count;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  psflow::ParseFlags(argc, argv,
                     "submits a burst of TrainingJobs to psflow-operator and measures how fast "
                     "they start (docs/benchmarks.md)");
  const int jobs = absl::GetFlag(FLAGS_jobs);
  const int workers = absl::GetFlag(FLAGS_workers_per_job);
  const int pods_per_job = 1 + workers;
  const std::string dir =
      std::filesystem::temp_directory_path() / absl::StrCat("psflow_bench_operator_", getpid());
  std::filesystem::create_directories(dir);
  std::unique_ptr<Cluster> cluster;
  if (absl::GetFlag(FLAGS_apiserver) == "test") {
    cluster = TestCluster::Start(dir);
  } else if (absl::GetFlag(FLAGS_apiserver) == "real") {
    cluster = RealCluster::Start(dir);
  } else {
    std::fprintf(stderr, "bench_operator_scale: --apiserver must be real or test\n");
    return 2;
  }
  if (cluster == nullptr) return 1;
  kube::KubeClient& client = cluster->client();
  const std::string ns = cluster->ns();

  std::string binary = absl::GetFlag(FLAGS_operator_binary);
  if (binary.empty()) binary = SelfDir() + "/psflow-operator";
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<std::string> args = {
      binary,
      "--kubeconfig=" + cluster->kubeconfig(),
      "--namespace=" + ns,
      "--metrics_address=127.0.0.1",
      "--metrics_port=0",
      "--leader_elect=false",
      absl::StrCat("--workers=", absl::GetFlag(FLAGS_operator_workers))};
  if (absl::GetFlag(FLAGS_qps) >= 0)
    args.push_back(absl::StrCat("--qps=", absl::GetFlag(FLAGS_qps)));
  if (absl::GetFlag(FLAGS_burst) >= 0) {
    args.push_back(absl::StrCat("--burst=", absl::GetFlag(FLAGS_burst)));
  }
  auto op = psflow::local::ChildProcess::Spawn(args, env);
  if (!op.ok()) {
    std::fprintf(stderr, "bench_operator_scale: %s\n", op.status().ToString().c_str());
    return 1;
  }
  std::string output;
  int metrics_port = 0;
  for (int i = 0; i < 100 && metrics_port == 0; ++i) {
    (*op)->WaitWithOutput(std::chrono::milliseconds(50), &output);
    const size_t at = output.find("serving /metrics, /healthz, /readyz on ");
    const size_t eol = at == std::string::npos ? at : output.find('\n', at);
    if (eol != std::string::npos) {
      absl::SimpleAtoi(output.substr(output.rfind(':', eol) + 1, eol - output.rfind(':', eol) - 1),
                       &metrics_port);
    }
  }
  if (metrics_port == 0) {
    std::fprintf(stderr, "bench_operator_scale: the operator did not start:\n%s\n", output.c_str());
    return 1;
  }
  // Started and synced: the first list/watch requests settle.
  (*op)->WaitWithOutput(std::chrono::milliseconds(1500), &output);
  const double rss_start = ProcStatusMiB((*op)->pid(), "VmRSS");
  const double requests_before = NonWatch(RequestsByVerb(metrics_port));
  const std::map<std::string, double> verbs_before = RequestsByVerb(metrics_port);

  // The burst.
  const auto start = Clock::now();
  std::atomic<int> create_errors{0};
  ParallelFor(jobs, 8, [&](int j) {
    if (!client
             .Create(kube::TrainingJobs(), ns,
                     MakeJob(j, workers, absl::GetFlag(FLAGS_network_policy)))
             .ok())
      ++create_errors;
  });
  if (create_errors > 0) {
    std::fprintf(stderr, "bench_operator_scale: %d jobs could not be created\n",
                 create_errors.load());
    return 1;
  }
  const double burst_seconds = std::chrono::duration<double>(Clock::now() - start).count();

  // The kubelet: every new pod runs; it notes when each job has all its pods.
  // Declared after the cluster, and stopped before it is torn down: its threads watch through
  // the cluster's client.
  auto kubelet = std::make_unique<BenchKubelet>(client, ns, pods_per_job, start);
  std::vector<double> job_seconds;
  double peak_rss = 0;
  std::optional<double> exit_seconds;
  const auto deadline = start + std::chrono::minutes(10);
  const double sigterm_after = absl::GetFlag(FLAGS_sigterm_after_s);
  bool signalled = false;
  Clock::time_point signalled_at;
  while (static_cast<int>(job_seconds.size()) < jobs && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double now = std::chrono::duration<double>(Clock::now() - start).count();
    peak_rss = std::max(peak_rss, ProcStatusMiB((*op)->pid(), "VmRSS"));
    job_seconds = kubelet->JobSeconds();
    output.clear();
    if ((*op)->WaitWithOutput(std::chrono::milliseconds(1), &output)) {
      if (signalled) {
        exit_seconds = std::chrono::duration<double>(Clock::now() - signalled_at).count();
      } else {
        std::fprintf(stderr, "bench_operator_scale: the operator exited:\n%s\n", output.c_str());
        return 1;
      }
      break;
    }
    if (sigterm_after > 0 && !signalled && now >= sigterm_after) {
      (*op)->Signal(SIGTERM);
      signalled = true;
      signalled_at = Clock::now();
    }
  }
  const double all_pods_seconds = job_seconds.empty() ? 0 : job_seconds.back();
  if (signalled) {
    if (!exit_seconds) {
      output.clear();
      if ((*op)->WaitWithOutput(std::chrono::seconds(60), &output)) {
        exit_seconds = std::chrono::duration<double>(Clock::now() - signalled_at).count();
      }
    }
    std::printf("bench_operator_scale: %d TrainingJobs x (1 ps + %d workers) against %s\n", jobs,
                workers, cluster->Describe().c_str());
    std::printf("  SIGTERM %.1f s into the burst (%zu of %d jobs had all their pods): ",
                sigterm_after, job_seconds.size(), jobs);
    if (exit_seconds) {
      std::printf("the operator exited after %.2f s\n", *exit_seconds);
    } else {
      std::printf("the operator did NOT exit within 60 s\n");
    }
    std::printf("  operator RSS: %.1f MiB at start, peak %.1f MiB\n", rss_start, peak_rss);
    std::filesystem::remove_all(dir);
    return exit_seconds ? 0 : 1;
  }
  if (static_cast<int>(job_seconds.size()) < jobs) {
    std::fprintf(stderr, "bench_operator_scale: only %zu of %d jobs got their pods\n",
                 job_seconds.size(), jobs);
    return 1;
  }
  // Until every job reports Running.
  while (Clock::now() < deadline) {
    int running = 0;
    const auto list = client.List(kube::TrainingJobs(), ns, {});
    if (list.ok()) {
      for (const Json& job : list->items) {
        running += kube::StringAt(job, "status", "state") == "Running";
      }
    }
    if (running == jobs) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double all_running_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const std::map<std::string, double> verbs_after = RequestsByVerb(metrics_port);
  const double burst_requests = NonWatch(verbs_after) - requests_before;

  // Idle.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::map<std::string, double> idle_before = RequestsByVerb(metrics_port);
  std::this_thread::sleep_for(std::chrono::seconds(absl::GetFlag(FLAGS_idle_s)));
  const std::map<std::string, double> idle_after = RequestsByVerb(metrics_port);
  const double idle_s = absl::GetFlag(FLAGS_idle_s);
  const double idle_rps = (NonWatch(idle_after) - NonWatch(idle_before)) / idle_s;
  const double idle_watch_rps = (idle_after.count("watch") ? idle_after.at("watch") : 0) -
                                (idle_before.count("watch") ? idle_before.at("watch") : 0);
  const double hwm = ProcStatusMiB((*op)->pid(), "VmHWM");
  const double rss_end = ProcStatusMiB((*op)->pid(), "VmRSS");

  std::printf(
      "bench_operator_scale: %d TrainingJobs x (1 ps + %d workers, TLS%s) created at once "
      "(in %.2f s) against %s; operator --workers=%d%s%s\n",
      jobs, workers, absl::GetFlag(FLAGS_network_policy) ? ", a NetworkPolicy" : "", burst_seconds,
      cluster->Describe().c_str(), absl::GetFlag(FLAGS_operator_workers),
      absl::GetFlag(FLAGS_qps) >= 0 ? absl::StrCat(" --qps=", absl::GetFlag(FLAGS_qps)).c_str()
                                    : " (default --qps)",
      absl::GetFlag(FLAGS_burst) >= 0
          ? absl::StrCat(" --burst=", absl::GetFlag(FLAGS_burst)).c_str()
          : "");
  std::printf("  time to all pods of a job: p50 %.2f s  p99 %.2f s  max %.2f s\n",
              Percentile(job_seconds, 0.5), Percentile(job_seconds, 0.99),
              Percentile(job_seconds, 1.0));
  std::printf("  every pod of every job exists after %.2f s; every job Running after %.2f s\n",
              all_pods_seconds, all_running_seconds);
  std::printf("  operator API requests (all but watch): %.0f in all, %.1f per job\n",
              burst_requests, burst_requests / jobs);
  for (const char* verb : {"get", "list", "create", "update", "update_status", "delete"}) {
    const double before = verbs_before.count(verb) ? verbs_before.at(verb) : 0;
    const double after = verbs_after.count(verb) ? verbs_after.at(verb) : 0;
    std::printf("    %-14s %.2f per job\n", verb, (after - before) / jobs);
  }
  std::printf("  operator RSS: %.1f MiB at start, peak %.1f MiB (VmHWM %.1f), %.1f MiB at end\n",
              rss_start, peak_rss, hwm, rss_end);
  std::printf("  idle for %.0f s: %.2f requests/s besides watches, %.0f watch requests\n", idle_s,
              idle_rps, idle_watch_rps);
  // The figures reach a pipe or a log before anything is torn down.
  std::fflush(stdout);
  (*op)->Signal(SIGTERM);
  (*op)->WaitWithOutput(std::chrono::seconds(10), &output);
  kubelet.reset();
  cluster.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
