// psflow installed on the real node as a user installs it, and watched as docs/metrics.md tells
// them to:
//   - `helm install` of helm/psflow puts psflow-operator in the cluster from its image
//     (psflow/operator:0.1.0, built by the psflow_images fixture): its ServiceAccount, Roles,
//     Lease and probes for real, the API server reached through the `kubernetes` Service's
//     ClusterIP as any in-cluster client reaches it (node.sh routes it; no kube-proxy here);
//   - deploy/examples/mnist-mlp.yaml, applied as it is but for the node's scheduler, trains to
//     Succeeded under that operator, with mutual TLS between its containers;
//   - Prometheus (Debian's, on this machine) finds the job's pods and the operator's pod through
//     deploy/prometheus/scrape-kubernetes.yml's relabel_configs, scrapes them over the pod network,
//     and every panel query of deploy/grafana/'s two dashboards returns data: the training panels
//     while the job trains, the operator's once it is over. The GPU panels aside: no GPU here
//     (tests/observe checks their syntax).
// Debian's prometheus has no Kubernetes discovery (pod_targets.h says why): this test plays
// kubernetes_sd_configs' part, listing the namespace's pods from the real API server every half
// second into a file_sd file with the labels Kubernetes discovery gives; the relabeling, the
// scrapes and the queries are Prometheus's own.
// The only changes to what a user runs: the chart's operator watches this test's namespace (the
// other tests' jobs are driven by operators of their own) and, with the job's pods, names the
// node's scheduler; Prometheus reads the pods from that file, in place of kubernetes_sd_configs,
// and scrapes every second.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/free_ports.h"
#include "core/read_file.h"
#include "operator/kube/resource.h"
#include "tests/node/node_test.h"
#include "tests/node/pod_targets.h"
#include "tests/observe/grafana_dashboard.h"
#include "tests/observe/prometheus_server.h"
#include "tests/operator_process.h"
#include "tests/test_util.h"

namespace psflow::node {
namespace {

using kube::Json;
using observe::PanelQuery;
using observe::PrometheusServer;
using testing::Eventually;
namespace fs = std::filesystem;

constexpr char kRelease[] = "psflow";
constexpr char kOperatorScrapeJob[] = "psflow-operator";  // scrape-kubernetes.yml's job_name

// Now, in Unix seconds: the time of an instant query.
double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Helm() {
  const std::string local = testing::SourceDir() + "/build/tools/bin/helm";
  return fs::exists(local) ? local : "helm";
}

std::vector<PanelQuery> QueriesOf(const std::string& file) {
  auto dashboard = observe::LoadDashboard(testing::SourceDir() + "/deploy/grafana/" + file);
  EXPECT_TRUE(dashboard.ok()) << dashboard.status();
  if (!dashboard.ok()) return {};
  auto queries = observe::PanelQueries(*dashboard, file);
  EXPECT_TRUE(queries.ok()) << queries.status();
  return queries.value_or(std::vector<PanelQuery>{});
}

class ChartOnNodeTest : public NodeTest {
 protected:
  ChartOnNodeTest() : NodeTest("node-chart") {}

  void SetUp() override {
    NodeTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (observe::PrometheusBinary().empty()) {
      GTEST_FAIL() << "prometheus not found: install Debian's prometheus (scripts/setup.sh)";
    }
    dir_ = fs::temp_directory_path() / absl::StrCat("psflow-", ns());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  void TearDown() override {
    stop_discovery_ = true;
    if (discovery_.joinable()) discovery_.join();
    prometheus_.reset();
    if (installed_) Run({Helm(), "uninstall", kRelease, "--namespace", ns(), "--wait"});
    if (!dir_.empty()) fs::remove_all(dir_);
    NodeTest::TearDown();
  }

  testing::CommandResult Run(const std::vector<std::string>& argv) {
    // helm's caches and settings in this test's folder, not the user's home.
    return testing::RunCommand(
        argv,
        testing::Environment({"KUBECONFIG=" + plane_->kubeconfig(),
                              "HELM_CACHE_HOME=" + (dir_ / "helm-cache").string(),
                              "HELM_CONFIG_HOME=" + (dir_ / "helm-config").string(),
                              "HELM_DATA_HOME=" + (dir_ / "helm-data").string()}),
        std::chrono::seconds(240));
  }

  // The operator pod's log, for a failure's diagnosis.
  std::string OperatorLog() {
    std::string log;
    plane_->Kubectl({"logs", "-n", ns(), "deployment/psflow-operator", "--tail=200"}, &log);
    return "operator (in the cluster):\n" + log;
  }

  // deploy/prometheus/scrape-kubernetes.yml with its kubernetes_sd_configs played by a file
  // (StartDiscovery), scraping and evaluating every second. Empty, with a failure, when the file
  // changed shape.
  std::string PrometheusConfig() {
    const std::string source = testing::SourceDir() + "/deploy/prometheus/";
    absl::StatusOr<std::string> read = ReadFile(source + "scrape-kubernetes.yml");
    EXPECT_TRUE(read.ok()) << read.status();
    std::string config = read.value_or("");
    const int discoveries = absl::StrReplaceAll(
        {{"    kubernetes_sd_configs:\n      - role: pod\n",
          absl::StrCat("    file_sd_configs:\n      - files: [", (dir_ / "pods.json").string(),
                       "]\n        refresh_interval: 1s\n")}},
        &config);
    const int intervals =
        absl::StrReplaceAll({{"scrape_interval: 15s", "scrape_interval: 1s"},
                             {"evaluation_interval: 15s", "evaluation_interval: 1s"}},
                            &config);
    EXPECT_EQ(discoveries, 2) << "scrape-kubernetes.yml changed: update chart_on_node_test.cc";
    EXPECT_EQ(intervals, 2) << "scrape-kubernetes.yml changed: update chart_on_node_test.cc";
    if (discoveries != 2 || intervals != 2) return "";
    fs::copy_file(source + "psflow-alerts.yml", dir_ / "psflow-alerts.yml");
    return config;
  }

  // Kubernetes discovery, played (pod_targets.h): the namespace's pods, listed every half second
  // by a client of their own, written whole where file_sd_configs reads them.
  void StartDiscovery() {
    auto client = plane_->AdminClient();
    ASSERT_TRUE(client.ok()) << client.status();
    std::ofstream(dir_ / "pods.json") << "[]";
    discovery_ = std::thread([this, client = std::move(*client)] {
      while (!stop_discovery_) {
        auto pods = client->List(kube::Pods(), ns(), {});
        if (pods.ok()) {
          const fs::path next = dir_ / "pods.json.next";
          std::ofstream(next) << PodTargetGroups(pods->items).dump();
          std::error_code ignored;
          fs::rename(next, dir_ / "pods.json", ignored);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    });
  }

  // The queries of `file` without data at this moment, each described. The GPU panels are skipped
  // (no GPU), and the language models' panels of a classifier's job need only be valid PromQL:
  // its words never rise, so a perplexity has nothing to divide by (tests/observe trains a
  // language model and checks them for data).
  std::vector<std::string> QueriesWithoutData(const std::string& file, const std::string& job,
                                              int* checked) {
    const std::map<std::string, std::string> variables = {
        {"namespace", ns()},  {"job", job},      {"__rate_interval", "15s"},
        {"__interval", "1s"}, {"__range", "5m"}, {"datasource", "prometheus"}};
    const double now = Now();
    std::vector<std::string> missing;
    *checked = 0;
    for (const PanelQuery& q : QueriesOf(file)) {
      if (absl::StrContains(q.expr, "psflow_worker_gpu_")) continue;
      ++*checked;
      const std::string expr = observe::SubstituteVariables(q.expr, variables);
      auto data = prometheus_->Query(expr, now);
      if (!data.ok()) {
        missing.push_back(absl::StrCat(q.Describe(), ": ", data.status().ToString()));
      } else if ((*data)["result"].empty() && !absl::StrContains(q.panel, "(language models)")) {
        missing.push_back(absl::StrCat(q.Describe(), ": no data\n    ", expr));
      }
    }
    return missing;
  }

  fs::path dir_;
  bool installed_ = false;
  std::atomic<bool> stop_discovery_{false};  // before the thread that reads it
  std::thread discovery_;
  std::unique_ptr<PrometheusServer> prometheus_;
};

TEST_F(
    ChartOnNodeTest,
    TheChartsOperatorRunsTheExampleAndPrometheusSeesItThroughPodDiscoveryPlayedFromTheApiServer) {
  // The chart, as docs/user-guide.md installs it, but for the namespace and the scheduler.
  const testing::CommandResult install =
      Run({Helm(), "install", kRelease, testing::SourceDir() + "/helm/psflow", "--namespace", ns(),
           "--set", "operator.watchNamespace=" + ns(), "--set",
           absl::StrCat("operator.schedulerName=", kSchedulerName), "--wait", "--timeout", "3m"});
  installed_ = install.status.ok();
  ASSERT_TRUE(installed_) << install.output << Diagnosis(OperatorLog());
  std::string ready;
  plane_->Kubectl({"get", "deployment", "psflow-operator", "-n", ns(), "-o",
                   "jsonpath={.status.readyReplicas}"},
                  &ready);
  ASSERT_EQ(ready, "1") << Diagnosis(OperatorLog());

  StartDiscovery();
  const std::string config = PrometheusConfig();
  ASSERT_FALSE(config.empty());
  std::ofstream(dir_ / "prometheus.yml") << config;
  auto ports = FreeLocalPorts(1);
  ASSERT_TRUE(ports.ok()) << ports.status();
  auto prometheus =
      PrometheusServer::Start((dir_ / "prometheus.yml").string(), (dir_ / "tsdb").string(),
                              ports->front(), std::chrono::seconds(30));
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  prometheus_ = std::move(*prometheus);

  // The example, training long enough to be watched: 40 s, however fast the CPU (a number of steps
  // trains 2.5 times faster on one CPU model seen here than on another).
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  Json& args = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"];
  for (Json& arg : args) {
    if (arg == "--train_epochs=5") arg = "--train_epochs=1000";
  }
  args.push_back("--train_seconds=40");
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());

  // Prometheus found every replica (and the operator) on its own, and scrapes them.
  std::string up;
  const bool found = Eventually(
      [&] {
        auto data = prometheus_->Query("up == 1", Now());
        if (!data.ok()) return false;
        std::set<std::string> targets;
        for (const Json& s : (*data)["result"]) {
          targets.insert(s["metric"].value("job", "") + "/" + s["metric"].value("pod", ""));
        }
        up = absl::StrJoin(targets, " ");
        return targets.count("mnist-mlp/mnist-mlp-ps-0") &&
               targets.count("mnist-mlp/mnist-mlp-worker-0") &&
               targets.count("mnist-mlp/mnist-mlp-worker-1") &&
               absl::StrContains(up, absl::StrCat(kOperatorScrapeJob, "/psflow-operator-"));
      },
      std::chrono::minutes(2));
  ASSERT_TRUE(found) << "up: " << up << "\n" << prometheus_->log() << Diagnosis(OperatorLog());

  // Every training panel has data while the job trains.
  std::vector<std::string> missing;
  int checked = 0;
  const bool training_shown = Eventually(
      [&] {
        missing = QueriesWithoutData("psflow-training.json", "mnist-mlp", &checked);
        return missing.empty() || State("mnist-mlp") == "Succeeded";
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(training_shown && missing.empty())
      << "training panels without data:\n  " << absl::StrJoin(missing, "\n  ");
  EXPECT_GE(checked, 25);

  ASSERT_EQ(WaitForEnd("mnist-mlp", std::chrono::minutes(5)), "Succeeded")
      << Diagnosis(OperatorLog());
  const double accuracy = ChiefAccuracy("mnist-mlp");
  EXPECT_GE(accuracy, 0.75) << Logs("mnist-mlp-worker-0");

  // The operator's panels, the job having gone Created, Running, Succeeded.
  const bool operator_shown = Eventually(
      [&] {
        missing = QueriesWithoutData("psflow-operator.json", kOperatorScrapeJob, &checked);
        return missing.empty();
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(operator_shown) << "operator panels without data:\n  "
                              << absl::StrJoin(missing, "\n  ");
  EXPECT_GE(checked, 15);
  std::cout << "in-cluster operator; Prometheus targets: " << up
            << "\nchief test_accuracy=" << accuracy << "\n";
}

}  // namespace
}  // namespace psflow::node
