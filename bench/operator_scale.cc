// bench_operator_scale: how psflow-operator copes with many TrainingJobs at once.
//
// Starts the test Kubernetes API server (tests/kube) in this process and the real
// psflow-operator binary against it, creates --jobs TrainingJobs of 1 ps + 4 workers at once,
// and measures
//   - time from the burst until each job has all its pods (p50, p99, max) and until every pod
//     of every job exists;
//   - API requests per job (all verbs but watch) and by verb;
//   - the operator's peak RSS (VmHWM) and RSS at the end;
//   - requests per second while idle (after every job is running, over --idle_s seconds):
//     target 0 besides watches.
// The kubelet is not simulated beyond marking every pod Running once it exists, so the
// operator's status writes (Created -> Running) are part of what is measured.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "operator/local/child_process.h"
#include "tests/kube/object_store.h"
#include "tests/kube/test_api_server.h"

ABSL_FLAG(int, jobs, 500, "TrainingJobs created at once");
ABSL_FLAG(int, workers_per_job, 4, "Worker replicas per job (plus 1 ps)");
ABSL_FLAG(double, qps, 50, "The operator's --qps");
ABSL_FLAG(int, burst, 100, "The operator's --burst");
ABSL_FLAG(int, operator_workers, 4, "The operator's --workers");
ABSL_FLAG(int, idle_s, 10, "Seconds of idle measurement");
ABSL_FLAG(std::string, operator_binary, "", "psflow-operator (default: beside this binary)");

namespace {

using psflow::kube::Json;
using Clock = std::chrono::steady_clock;

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

int64_t NonWatchRequests(const psflow::kubetest::TestApiServer& server) {
  return server.RequestCount() - server.RequestCount("watch");
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int jobs = absl::GetFlag(FLAGS_jobs);
  const int workers = absl::GetFlag(FLAGS_workers_per_job);
  const int pods_per_job = 1 + workers;

  psflow::kubetest::ObjectStore::Options store_options;
  store_options.history_window = 200000;
  psflow::kubetest::ObjectStore store(store_options);
  store.RegisterBuiltins();
  store.RegisterResource(psflow::kube::TrainingJobs(), true);
  auto server = psflow::kubetest::TestApiServer::Start(&store, {});
  if (!server.ok()) {
    std::fprintf(stderr, "bench_operator_scale: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string dir = std::filesystem::temp_directory_path() /
                          absl::StrCat("psflow_bench_operator_", getpid());
  std::filesystem::create_directories(dir);
  const std::string kubeconfig = dir + "/kubeconfig";
  if (!(*server)->WriteKubeconfig(kubeconfig).ok()) return 1;

  std::string binary = absl::GetFlag(FLAGS_operator_binary);
  if (binary.empty()) binary = SelfDir() + "/psflow-operator";
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  auto op = psflow::local::ChildProcess::Spawn(
      {binary, "--kubeconfig=" + kubeconfig, "--metrics_address=127.0.0.1", "--metrics_port=0",
       "--leader_elect=false", absl::StrCat("--qps=", absl::GetFlag(FLAGS_qps)),
       absl::StrCat("--burst=", absl::GetFlag(FLAGS_burst)),
       absl::StrCat("--workers=", absl::GetFlag(FLAGS_operator_workers))},
      env);
  if (!op.ok()) {
    std::fprintf(stderr, "bench_operator_scale: %s\n", op.status().ToString().c_str());
    return 1;
  }
  std::string output;
  // Started and synced: the first reconcile-free list/watch requests settle.
  (*op)->WaitWithOutput(std::chrono::milliseconds(1500), &output);
  const double rss_start = ProcStatusMiB((*op)->pid(), "VmRSS");

  // The burst.
  const int64_t requests_before = NonWatchRequests(**server);
  std::map<std::string, std::map<std::string, int64_t>> verbs_before;
  const auto start = Clock::now();
  for (int j = 0; j < jobs; ++j) {
    auto replica = [](int n, const char* image) {
      return Json{{"replicas", n},
                  {"restartPolicy", "OnFailure"},
                  {"template",
                   {{"spec", {{"containers", Json::array({{{"name", "psflow"},
                                                           {"image", image}}})}}}}}};
    };
    Json job = {{"apiVersion", "psflow.io/v1alpha1"},
                {"kind", "TrainingJob"},
                {"metadata", {{"name", absl::StrCat("job-", j)}, {"namespace", "default"}}},
                {"spec",
                 {{"replicaSpecs",
                   {{"PS", replica(1, "psflow/ps:0.1.0")},
                    {"Worker", replica(workers, "psflow/worker:0.1.0")}}}}}};
    if (!store.Create(psflow::kube::TrainingJobs(), "default", job).ok()) return 1;
  }

  // Play the kubelet: every new pod runs; note when each job has all its pods.
  std::map<std::string, int> pods_of;
  std::vector<double> job_seconds;
  double all_pods_seconds = 0;
  double peak_rss = 0;
  const auto deadline = start + std::chrono::minutes(10);
  while (static_cast<int>(job_seconds.size()) < jobs && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double now = std::chrono::duration<double>(Clock::now() - start).count();
    psflow::kube::ListOptions owned;
    owned.label_selector = "psflow.io/job-name";
    const auto pods = store.List(psflow::kube::Pods(), "default", owned);
    if (!pods.ok()) continue;
    std::map<std::string, int> count;
    for (const Json& pod : pods->items) {
      ++count[psflow::kube::Label(pod, "psflow.io/job-name")];
      if (psflow::kube::StringAt(pod, "status", "phase") != "Running") {
        store.SetPodPhase("default", psflow::kube::Name(pod), "Running").IgnoreError();
      }
    }
    for (const auto& [job, n] : count) {
      if (n == pods_per_job && pods_of[job] != pods_per_job) job_seconds.push_back(now);
      pods_of[job] = n;
    }
    all_pods_seconds = now;
    peak_rss = std::max(peak_rss, ProcStatusMiB((*op)->pid(), "VmRSS"));
    output.clear();
    (*op)->WaitWithOutput(std::chrono::milliseconds(1), &output);
  }
  if (static_cast<int>(job_seconds.size()) < jobs) {
    std::fprintf(stderr, "bench_operator_scale: only %zu of %d jobs got their pods\n",
                 job_seconds.size(), jobs);
    return 1;
  }
  // Until every job reports Running.
  int running = 0;
  while (Clock::now() < deadline) {
    running = 0;
    const auto list = store.List(psflow::kube::TrainingJobs(), "default", {});
    for (const Json& job : list->items) {
      running += psflow::kube::StringAt(job, "status", "state") == "Running";
    }
    if (running == jobs) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double all_running_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t burst_requests = NonWatchRequests(**server) - requests_before;

  // Idle.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t idle_before = NonWatchRequests(**server);
  const int64_t idle_watch_before = (*server)->RequestCount("watch");
  std::this_thread::sleep_for(std::chrono::seconds(absl::GetFlag(FLAGS_idle_s)));
  const double idle_s = absl::GetFlag(FLAGS_idle_s);
  const double idle_rps = (NonWatchRequests(**server) - idle_before) / idle_s;
  const double idle_watch_rps = ((*server)->RequestCount("watch") - idle_watch_before) / idle_s;
  const double hwm = ProcStatusMiB((*op)->pid(), "VmHWM");
  const double rss_end = ProcStatusMiB((*op)->pid(), "VmRSS");

  std::printf("bench_operator_scale: %d TrainingJobs x (1 ps + %d workers) created at once; "
              "operator --qps=%g --burst=%d --workers=%d\n",
              jobs, workers, absl::GetFlag(FLAGS_qps), absl::GetFlag(FLAGS_burst),
              absl::GetFlag(FLAGS_operator_workers));
  std::printf("  time to all pods of a job: p50 %.2f s  p99 %.2f s  max %.2f s\n",
              Percentile(job_seconds, 0.5), Percentile(job_seconds, 0.99),
              Percentile(job_seconds, 1.0));
  std::printf("  every pod of every job exists after %.2f s; every job Running after %.2f s\n",
              all_pods_seconds, all_running_seconds);
  std::printf("  API requests (all but watch): %lld in all, %.1f per job\n",
              static_cast<long long>(burst_requests), static_cast<double>(burst_requests) / jobs);
  for (const char* verb : {"get", "list", "create", "update", "update_status", "delete"}) {
    std::printf("    %-14s %.2f per job\n", verb,
                static_cast<double>((*server)->RequestCount(verb)) / jobs);
  }
  std::printf("  operator RSS: %.1f MiB at start, peak %.1f MiB (VmHWM %.1f), %.1f MiB at end\n",
              rss_start, peak_rss, hwm, rss_end);
  std::printf("  idle for %.0f s: %.2f requests/s besides watches, %.2f watch requests/s\n",
              idle_s, idle_rps, idle_watch_rps);
  (*op)->Signal(SIGTERM);
  (*op)->WaitWithOutput(std::chrono::seconds(10), &output);
  std::filesystem::remove_all(dir);
  return 0;
}
