// psflow-operator, the real binary, against faults a real Kubernetes API server does not produce
// on demand: watches dropped mid-stream, every watch ending in 410 Gone, an API server that stops
// answering and comes back, a CRD that is not installed. These run against tests/kube's API
// server (an ObjectStore served over HTTP on loopback), which can do each of them; everything
// else the operator does is tested against the real server in operator_e2e_test.cc.
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
#include "tests/operator_process.h"
#include "tests/test_util.h"

namespace psflow {
namespace {

using kube::Json;
using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::Eventually;
using testing::OperatorProcess;

Json Job(const std::string& name, int ps, int workers, const std::string& policy) {
  return testing::MinimalJob(name, ps, workers, policy);
}

class OperatorFaultsTest : public ::testing::Test {
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

TEST_F(OperatorFaultsTest, RecoversFromDroppedWatchesGoneVersionsAndAnUnreachableServer) {
  OperatorProcess op(kubeconfig_, "op-a", "default");
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

TEST_F(OperatorFaultsTest, MissingCrdExitsNamingIt) {
  store_.UnregisterResource(kube::TrainingJobs());
  OperatorProcess op(kubeconfig_, "op-a", "default");
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

TEST_F(OperatorFaultsTest, MalformedKubeconfigExitsWithOneLine) {
  const std::string bad = (dir_ / "bad-kubeconfig").string();
  {
    std::FILE* f = std::fopen(bad.c_str(), "w");
    std::fputs("apiVersion: v1\nclusters: [\n", f);
    std::fclose(f);
  }
  OperatorProcess op(bad, "op-a", "default");
  auto exit = op.Wait(milliseconds(10000));
  ASSERT_TRUE(exit.has_value()) << op.output();
  EXPECT_EQ(exit->code, 1);
  const auto lines = testing::LinesWith(op.output(), "psflow-operator: ");
  ASSERT_EQ(lines.size(), 1u) << op.output();
  EXPECT_TRUE(absl::StrContains(lines[0], bad)) << lines[0];
}

}  // namespace
}  // namespace psflow
