// psflow-operator, the real binary, against the test Kubernetes API server (tests/kube) on
// loopback: real HTTP, list/watch, status subresource, Leases. There is no kubelet and no
// scheduler here: the tests play them, setting pod phases through the store as a kubelet
// would report them. Named *Apiserver* because a real Kubernetes API server cannot run here.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/http_get.h"
#include "core/metrics.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/kube/object_store.h"
#include "tests/kube/test_api_server.h"
#include "tests/test_util.h"

namespace psflow {
namespace {

using kube::Json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The operator as a child process; its output is collected on a thread.
class OperatorProcess {
 public:
  OperatorProcess(const std::string& kubeconfig, const std::string& identity,
                  std::vector<std::string> extra_flags = {}) {
    std::vector<std::string> argv = {testing::Binary("psflow-operator"),
                                     "--kubeconfig=" + kubeconfig,
                                     "--identity=" + identity,
                                     "--metrics_address=127.0.0.1",
                                     "--metrics_port=0",
                                     "--lease_namespace=default",
                                     "--lease_duration_s=2",
                                     "--renew_deadline_s=1.5",
                                     "--retry_period_s=0.25",
                                     "--watch_timeout_s=5",
                                     "--workers=2"};
    for (std::string& flag : extra_flags) argv.push_back(std::move(flag));
    auto child = local::ChildProcess::Spawn(argv, testing::Environment({}));
    EXPECT_TRUE(child.ok()) << child.status();
    child_ = *std::move(child);
    reader_ = std::thread([this] {
      std::string chunk;
      while (true) {
        chunk.clear();
        std::optional<local::ExitStatus> exit;
        {
          std::lock_guard<std::mutex> lock(child_mu_);  // ChildProcess is not thread-safe
          exit = child_->WaitWithOutput(milliseconds(100), &chunk);
        }
        {
          std::lock_guard<std::mutex> lock(mu_);
          output_ += chunk;
          if (exit) {
            exit_ = exit;
            return;
          }
        }
        if (stop_reading_) return;
      }
    });
  }
  ~OperatorProcess() {
    Signal(SIGKILL);
    stop_reading_ = true;
    reader_.join();
  }
  void Signal(int sig) {
    std::lock_guard<std::mutex> lock(child_mu_);
    child_->Signal(sig);  // a no-op once the child has been reaped
  }
  // Waits for the exit; nullopt after `timeout`.
  std::optional<local::ExitStatus> Wait(milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (exit_) return exit_;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return std::nullopt;
  }
  std::string output() {
    std::lock_guard<std::mutex> lock(mu_);
    return output_;
  }

 private:
  std::mutex child_mu_;  // guards child_, used by the reader and Signal
  std::unique_ptr<local::ChildProcess> child_;
  std::thread reader_;
  std::atomic<bool> stop_reading_{false};
  std::mutex mu_;
  std::string output_;
  std::optional<local::ExitStatus> exit_;
};

// Polls `done` every 50 ms for up to `timeout`.
bool Eventually(const std::function<bool()>& done, milliseconds timeout = milliseconds(20000)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return done();
}

Json Job(const std::string& name, int ps, int workers, const std::string& policy) {
  auto replica = [&](int n) {
    return Json{{"replicas", n},
                {"restartPolicy", policy},
                {"template",
                 {{"spec",
                   {{"containers",
                     Json::array({{{"name", "psflow"}, {"image", "psflow/worker:test"}}})}}}}}};
  };
  return {{"apiVersion", "psflow.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec", {{"replicaSpecs", {{"PS", replica(ps)}, {"Worker", replica(workers)}}}}}};
}

class OperatorApiserverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.RegisterBuiltins();
    store_.RegisterResource(kube::TrainingJobs(), /*has_status_subresource=*/true);
    StartServer();
  }

  void StartServer() {
    auto server = kubetest::TestApiServer::Start(&store_, {});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("psflow_operator_e2e_", getpid(), "_", counter_++);
    std::filesystem::create_directories(dir_);
    kubeconfig_ = (dir_ / "kubeconfig").string();
    ASSERT_TRUE(server_->WriteKubeconfig(kubeconfig_).ok());
  }

  void TearDown() override { std::filesystem::remove_all(dir_); }

  void CreateJob(const Json& job) {
    ASSERT_TRUE(store_.Create(kube::TrainingJobs(), "default", job).ok());
  }
  std::vector<Json> Pods(const std::string& job) {
    kube::ListOptions options;
    options.label_selector = "psflow.io/job-name=" + job;
    return store_.List(kube::Pods(), "default", options).value().items;
  }
  std::vector<Json> Services(const std::string& job) {
    kube::ListOptions options;
    options.label_selector = "psflow.io/job-name=" + job;
    return store_.List(kube::Services(), "default", options).value().items;
  }
  std::string State(const std::string& job) {
    auto got = store_.Get(kube::TrainingJobs(), "default", job);
    return got.ok() ? kube::StringAt(*got, "status", "state") : "<gone>";
  }
  Json Condition(const std::string& job, const std::string& type) {
    auto got = store_.Get(kube::TrainingJobs(), "default", job);
    if (!got.ok() || !(*got)["status"].contains("conditions")) return Json();
    for (const Json& c : (*got)["status"]["conditions"]) {
      if (c["type"] == type) return c;
    }
    return Json();
  }
  void RunAll(const std::string& job) {
    for (const Json& pod : Pods(job)) {
      if (kube::StringAt(pod, "status", "phase") != "Running") {
        ASSERT_TRUE(store_.SetPodPhase("default", kube::Name(pod), "Running").ok());
      }
    }
  }
  std::string LeaseHolder() {
    auto lease = store_.Get(kube::Leases(), "default", "psflow-operator");
    return lease.ok() ? kube::StringAt(*lease, "spec", "holderIdentity") : "";
  }

  static inline int counter_ = 0;
  kubetest::ObjectStore store_;
  std::unique_ptr<kubetest::TestApiServer> server_;
  std::filesystem::path dir_;
  std::string kubeconfig_;
};

TEST_F(OperatorApiserverTest, JobGetsItsServicesPodsAndStatus) {
  OperatorProcess op(kubeconfig_, "op-a");
  CreateJob(Job("mnist", 1, 2, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("mnist").size() == 3 && State("mnist") == "Created"; }))
      << op.output();
  EXPECT_EQ(Services("mnist").size(), 3u);
  RunAll("mnist");
  ASSERT_TRUE(Eventually([&] { return State("mnist") == "Running"; })) << op.output();
  auto job = store_.Get(kube::TrainingJobs(), "default", "mnist").value();
  EXPECT_EQ(job["status"]["workers"], "2/2");
  store_.SetPodPhase("default", "mnist-worker-0", "Succeeded").IgnoreError();
  ASSERT_TRUE(Eventually([&] { return State("mnist") == "Succeeded"; })) << op.output();
  // The ps is stopped, and (cleanPodPolicy Running) so is the other worker.
  ASSERT_TRUE(Eventually([&] { return Pods("mnist").size() == 1; })) << op.output();
  EXPECT_EQ(kube::Name(Pods("mnist")[0]), "mnist-worker-0");
  EXPECT_EQ(LeaseHolder(), "op-a");
}

TEST_F(OperatorApiserverTest, FailedPodsRestartUntilBackoffLimitThenFailWithTheCause) {
  OperatorProcess op(kubeconfig_, "op-a");
  Json job = Job("oom", 1, 1, "ExitCode");
  job["spec"]["runPolicy"]["backoffLimit"] = 1;
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return Pods("oom").size() == 2; })) << op.output();
  RunAll("oom");
  const std::string uid = kube::Uid(store_.Get(kube::Pods(), "default", "oom-worker-0").value());
  store_.SetPodPhase("default", "oom-worker-0", "Failed", 137, "OOMKilled").IgnoreError();
  ASSERT_TRUE(Eventually([&] {
    auto pod = store_.Get(kube::Pods(), "default", "oom-worker-0");
    return pod.ok() && kube::Uid(*pod) != uid;
  })) << op.output();
  store_.SetPodPhase("default", "oom-worker-0", "Failed", 137, "OOMKilled").IgnoreError();
  ASSERT_TRUE(Eventually([&] { return State("oom") == "Failed"; })) << op.output();
  const Json failed = Condition("oom", "Failed");
  EXPECT_EQ(failed["reason"], "BackoffLimitExceeded");
  EXPECT_TRUE(absl::StrContains(failed["message"].get<std::string>(),
                                "Worker 0 (pod oom-worker-0) failed: exit code 137 (OOMKilled)"))
      << failed;
}

TEST_F(OperatorApiserverTest, DeadlineAndSuspendResume) {
  OperatorProcess op(kubeconfig_, "op-a");
  Json late = Job("late", 1, 1, "OnFailure");
  late["spec"]["runPolicy"]["activeDeadlineSeconds"] = 2;
  CreateJob(late);
  CreateJob(Job("pause", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("pause").size() == 2; })) << op.output();
  Json pause = store_.Get(kube::TrainingJobs(), "default", "pause").value();
  pause["spec"]["runPolicy"]["suspend"] = true;
  ASSERT_TRUE(store_.Update(kube::TrainingJobs(), "default", pause).ok());
  ASSERT_TRUE(Eventually([&] { return State("pause") == "Suspended" && Pods("pause").empty(); }))
      << op.output();
  pause = store_.Get(kube::TrainingJobs(), "default", "pause").value();
  pause["spec"]["runPolicy"]["suspend"] = false;
  ASSERT_TRUE(store_.Update(kube::TrainingJobs(), "default", pause).ok());
  ASSERT_TRUE(Eventually([&] { return Pods("pause").size() == 2; })) << op.output();
  EXPECT_EQ(Condition("pause", "Suspended")["reason"], "Resumed");

  ASSERT_TRUE(Eventually([&] { return State("late") == "Failed"; })) << op.output();
  EXPECT_EQ(Condition("late", "Failed")["reason"], "DeadlineExceeded");
  EXPECT_TRUE(Eventually([&] { return Pods("late").empty(); }));
}

TEST_F(OperatorApiserverTest, RestartedOperatorCreatesNoDuplicates) {
  auto op = std::make_unique<OperatorProcess>(kubeconfig_, "op-a");
  CreateJob(Job("steady", 1, 3, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("steady").size() == 4; })) << op->output();
  std::vector<std::string> uids;
  for (const Json& pod : Pods("steady")) uids.push_back(kube::Uid(pod));
  op->Signal(SIGKILL);  // no graceful release: the next one waits out the Lease
  ASSERT_TRUE(op->Wait(milliseconds(5000)).has_value());
  const int64_t creates = store_.OperationCount("create");
  op = std::make_unique<OperatorProcess>(kubeconfig_, "op-b");
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "op-b"; })) << op->output();
  RunAll("steady");
  ASSERT_TRUE(Eventually([&] { return State("steady") == "Running"; })) << op->output();
  std::vector<std::string> after;
  for (const Json& pod : Pods("steady")) after.push_back(kube::Uid(pod));
  EXPECT_EQ(after, uids);
  // op-b created nothing but its Lease update... and no pods or services.
  EXPECT_LE(store_.OperationCount("create") - creates, 2) << "only Events may be new";
}

TEST_F(OperatorApiserverTest, RecoversFromDroppedWatchesGoneVersionsAndAnUnreachableServer) {
  OperatorProcess op(kubeconfig_, "op-a");
  CreateJob(Job("one", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("one").size() == 2; })) << op.output();
  server_->CloseWatches();
  CreateJob(Job("two", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("two").size() == 2; })) << op.output();
  store_.Compact();  // every watch ends with 410 Gone: the informers list again
  CreateJob(Job("three", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("three").size() == 2; })) << op.output();
  server_->Stop();  // unreachable: connection refused
  std::this_thread::sleep_for(milliseconds(2500));
  CreateJob(Job("four", 1, 1, "OnFailure"));
  ASSERT_TRUE(server_->Resume().ok());
  ASSERT_TRUE(Eventually([&] { return Pods("four").size() == 2; })) << op.output();
  EXPECT_FALSE(op.Wait(milliseconds(10)).has_value()) << op.output();
}

TEST_F(OperatorApiserverTest, TwoOperatorsOneLeaderAndFailover) {
  OperatorProcess a(kubeconfig_, "op-a");
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "op-a"; })) << a.output();
  OperatorProcess b(kubeconfig_, "op-b");
  CreateJob(Job("first", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("first").size() == 2; })) << a.output();
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_EQ(LeaseHolder(), "op-a");
  EXPECT_FALSE(absl::StrContains(b.output(), "caches synced")) << b.output();
  a.Signal(SIGTERM);
  auto exit = a.Wait(milliseconds(10000));
  ASSERT_TRUE(exit.has_value()) << a.output();
  EXPECT_TRUE(exit->ok()) << exit->Describe() << "\n" << a.output();
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "op-b"; })) << b.output();
  CreateJob(Job("second", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("second").size() == 2; })) << b.output();
}

TEST_F(OperatorApiserverTest, ASpecPsflowCannotRunFailsAndTheOperatorGoesOn) {
  OperatorProcess op(kubeconfig_, "op-a");
  Json bad = Job("nowork", 1, 1, "Never");
  bad["spec"]["replicaSpecs"].erase("Worker");
  CreateJob(bad);
  // Not even a valid object for the schema: the operator must still not crash.
  Json odd = Job("odd", 1, 1, "Never");
  odd["spec"]["replicaSpecs"]["Worker"] = "three";
  CreateJob(odd);
  ASSERT_TRUE(Eventually([&] { return State("nowork") == "Failed" && State("odd") == "Failed"; }))
      << op.output();
  EXPECT_EQ(Condition("nowork", "Failed")["message"],
            "TrainingJob default/nowork: spec.replicaSpecs: needs at least one Worker (or a "
            "Chief) replica");
  CreateJob(Job("fine", 1, 1, "Never"));
  ASSERT_TRUE(Eventually([&] { return Pods("fine").size() == 2; })) << op.output();
  EXPECT_TRUE(Pods("nowork").empty());
}

TEST_F(OperatorApiserverTest, ServesMetricsHealthAndReadiness) {
  OperatorProcess op(kubeconfig_, "op-a");
  CreateJob(Job("m", 1, 1, "Never"));
  ASSERT_TRUE(Eventually([&] { return Pods("m").size() == 2; })) << op.output();
  int port = 0;
  ASSERT_TRUE(Eventually([&] {
    for (const std::string& line : testing::LinesWith(op.output(), "serving /metrics")) {
      port = std::stoi(line.substr(line.rfind(':') + 1));
    }
    return port > 0;
  })) << op.output();
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/healthz", milliseconds(2000)).value_or(""), "ok\n");
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/readyz", milliseconds(2000)).value_or(""), "ok\n");
  std::string text;
  ASSERT_TRUE(Eventually([&] {
    text = HttpGet("127.0.0.1", port, "/metrics", milliseconds(2000)).value_or("");
    return absl::StrContains(text, "psflow_operator_pods_created_total 2");
  })) << text;
  for (const char* metric :
       {"psflow_operator_reconcile_total", "psflow_operator_reconcile_errors_total",
        "psflow_operator_reconcile_duration_seconds_bucket", "psflow_operator_workqueue_depth",
        "psflow_operator_jobs{state=\"Created\"}", "psflow_operator_leader 1",
        "psflow_operator_api_requests_total{code=\"201\",verb=\"create\"}",
        "psflow_operator_job_time_to_running_seconds_count"}) {
    EXPECT_TRUE(absl::StrContains(text, metric)) << metric << "\n" << text;
  }
}

// The test plays the workers too: one /metrics endpoint whose counters grow at a known rate,
// named by the pods' container port "metrics", with the pods' podIP 127.0.0.1.
TEST_F(OperatorApiserverTest, ThroughputIsMeasuredFromTheWorkersIntoStatus) {
  auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const Labels labels = {{"job", "lm"}, {"replica_type", "worker"}, {"replica_index", "0"}};
  prometheus::Counter& examples =
      AddCounter((*endpoint)->registry(), "psflow_worker_examples_total", "Examples.", labels);
  prometheus::Counter& words =
      AddCounter((*endpoint)->registry(), "psflow_worker_words_total", "Words.", labels);
  std::atomic<bool> stop{false};
  std::thread feeder([&] {  // 10000 examples/s, 200000 words/s
    while (!stop) {
      examples.Increment(1000);
      words.Increment(20000);
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Join() {
      stop = true;
      thread.join();
    }
  } join{stop, feeder};

  OperatorProcess op(kubeconfig_, "op-a", {"--throughput_interval_s=1"});
  Json job = Job("lm", 1, 1, "OnFailure");
  for (const char* type : {"PS", "Worker"}) {  // the PS points there too: it must not count
    job["spec"]["replicaSpecs"][type]["template"]["spec"]["containers"][0]["ports"] =
        Json::array({{{"name", "metrics"}, {"containerPort", (*endpoint)->port()}}});
  }
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return Pods("lm").size() == 2; })) << op.output();
  RunAll("lm");
  for (const Json& running : Pods("lm")) {
    Json pod = running;
    pod["status"]["podIP"] = "127.0.0.1";
    pod["status"]["podIPs"] = Json::array({{{"ip", "127.0.0.1"}}});
    ASSERT_TRUE(store_.UpdateStatus(kube::Pods(), "default", pod).ok());
  }
  ASSERT_TRUE(Eventually([&] { return State("lm") == "Running"; })) << op.output();
  Json throughput;
  const bool near = Eventually(
      [&] {
        const Json status = store_.Get(kube::TrainingJobs(), "default", "lm").value()["status"];
        if (!status.is_object() || !status.contains("throughput")) return false;
        throughput = status["throughput"];
        const double e = throughput.value("examplesPerSecond", 0.0);
        const double w = throughput.value("wordsPerSecond", 0.0);
        return e > 7000 && e < 13000 && w > 140000 && w < 260000;
      },
      milliseconds(30000));
  EXPECT_TRUE(near) << throughput << "\n" << op.output();
  RecordProperty("throughput", throughput.dump());
}

// --- Bad input: one clear line and a non-zero exit ---

TEST_F(OperatorApiserverTest, MissingCrdExitsNamingIt) {
  store_.UnregisterResource(kube::TrainingJobs());
  OperatorProcess op(kubeconfig_, "op-a");
  auto exit = op.Wait(milliseconds(20000));
  ASSERT_TRUE(exit.has_value()) << op.output();
  EXPECT_EQ(exit->code, 1);
  EXPECT_EQ(testing::LinesWith(op.output(),
                               "psflow-operator: CRD trainingjobs.psflow.io is not "
                               "installed")
                .size(),
            1u)
      << op.output();
}

TEST_F(OperatorApiserverTest, RbacForbiddenExitsNamingWhatIsMissing) {
  server_->Forbid("list", kube::Pods());
  OperatorProcess op(kubeconfig_, "op-a");
  auto exit = op.Wait(milliseconds(20000));
  ASSERT_TRUE(exit.has_value()) << op.output();
  EXPECT_EQ(exit->code, 1);
  const auto lines = testing::LinesWith(op.output(), "psflow-operator: RBAC forbids");
  ASSERT_EQ(lines.size(), 1u) << op.output();
  EXPECT_TRUE(absl::StrContains(lines[0], "cannot list resource \"pods\"")) << lines[0];
}

TEST_F(OperatorApiserverTest, MalformedKubeconfigExitsWithOneLine) {
  const std::string bad = (dir_ / "bad-kubeconfig").string();
  {
    std::FILE* f = std::fopen(bad.c_str(), "w");
    std::fputs("apiVersion: v1\nclusters: [\n", f);
    std::fclose(f);
  }
  OperatorProcess op(bad, "op-a");
  auto exit = op.Wait(milliseconds(10000));
  ASSERT_TRUE(exit.has_value()) << op.output();
  EXPECT_EQ(exit->code, 1);
  const auto lines = testing::LinesWith(op.output(), "psflow-operator: ");
  ASSERT_EQ(lines.size(), 1u) << op.output();
  EXPECT_TRUE(absl::StrContains(lines[0], bad)) << lines[0];
}

}  // namespace
}  // namespace psflow
