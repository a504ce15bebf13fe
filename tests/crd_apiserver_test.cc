// The TrainingJob CRD on a real Kubernetes API server (tests/control_plane): every status field the
// operator writes is stored as written (a field the schema does not declare is pruned, and the
// operator would then never see its own write), every example manifest and the chart's copy of
// the CRD are accepted with kubectl's strict validation, and what the schema refuses is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "operator/controller/job_status.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/control_plane/control_plane.h"
#include "tests/test_util.h"

namespace psflow {
namespace {

using controller::Condition;
using controller::ConditionType;
using controller::IndexStatus;
using controller::JobStatus;
using controller::ReplicaFailure;
using controller::ReplicaStatus;
using kube::Json;

Json Job(const std::string& name) {
  const Json replica = {
      {"replicas", 1},
      {"template",
       {{"spec", {{"containers", Json::array({{{"name", "psflow"}, {"image", "psflow/w"}}})}}}}}};
  return {{"apiVersion", "psflow.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"replicaSpecs", {{"PS", replica}, {"Worker", replica}}}}}};
}

// A status with every field JobStatus can hold set, each to a value the operator can produce.
JobStatus EveryField() {
  const absl::Time t0 = absl::FromUnixSeconds(1'790'000'000);
  JobStatus s;
  s.SetCondition(ConditionType::kCreated, true, "TrainingJobCreated", "created its 4 replicas", t0);
  s.SetCondition(ConditionType::kRunning, true, "TrainingJobRunning", "all 4 replicas are running",
                 t0 + absl::Seconds(1));
  s.SetCondition(ConditionType::kRestarting, true, "ReplicaRestarting",
                 "Worker 1 (pod j-worker-1) failed: exit code 137 (OOMKilled); restarting it",
                 t0 + absl::Seconds(2));
  s.SetCondition(ConditionType::kSuspended, true, "Suspended", "suspended", t0 + absl::Seconds(3));
  s.SetCondition(ConditionType::kSuspended, false, "Resumed", "resumed", t0 + absl::Seconds(4));
  s.SetCondition(ConditionType::kFailed, true, "BackoffLimitExceeded",
                 "restart 3 of the job's replicas exceeds backoffLimit 2", t0 + absl::Seconds(5));
  s.conditions.push_back({ConditionType::kSucceeded, false, "TrainingJobSucceeded", "",
                          controller::FormatTimestamp(t0), controller::FormatTimestamp(t0)});
  int n = 0;
  for (api::ReplicaType type : {api::ReplicaType::kChief, api::ReplicaType::kPS,
                                api::ReplicaType::kWorker, api::ReplicaType::kEvaluator}) {
    ReplicaStatus& rs = s.replica_statuses[type];
    rs.active = 1 + n;
    rs.ready = n;
    rs.succeeded = 2;
    rs.failed = 3;
    rs.restarts = 4 + n;
    rs.completed_indexes = {0, 2, 3, 4};
    IndexStatus& replaced = rs.indexes[1];
    replaced.restarts = 3;
    replaced.replaced_restarts = 2;
    replaced.last_failure =
        ReplicaFailure{"OOMKilled", 137, "the container ran out of memory", "j-worker-1",
                       controller::FormatTimestamp(t0 + absl::Seconds(n))};
    IndexStatus& evicted = rs.indexes[5];
    evicted.restarts = 1 + n;
    evicted.last_failure = ReplicaFailure{"Evicted", std::nullopt,
                                          "The node was low on resource: memory.", "j-worker-5",
                                          controller::FormatTimestamp(t0)};
    ++n;
  }
  s.start_time = controller::FormatTimestamp(t0);
  s.completion_time = controller::FormatTimestamp(t0 + absl::Seconds(60));
  s.observed_generation = 7;
  s.restart_count = 3;
  s.workers = "3/4";
  s.worker_selector = "psflow.io/job-name=j,psflow.io/replica-type=worker";
  s.words_per_second = 123456.7;
  s.examples_per_second = 74665.2;
  return s;
}

class CrdApiserverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<kubereal::ControlPlane> plane = kubereal::ControlPlane::Get();
    if (!plane.ok()) GTEST_SKIP() << plane.status().message();
    plane_ = std::make_unique<kubereal::ControlPlane>(*plane);
    auto client = plane_->AdminClient();
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    auto ns = kubereal::TestNamespace::Create(*client_, "crd");
    ASSERT_TRUE(ns.ok()) << ns.status();
    namespace_ = *std::move(ns);
  }
  const std::string& ns() const { return namespace_->name(); }

  std::unique_ptr<kubereal::ControlPlane> plane_;
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<kubereal::TestNamespace> namespace_;
};

TEST_F(CrdApiserverTest, EveryStatusFieldTheOperatorWritesIsStoredAsWritten) {
  absl::StatusOr<Json> job = client_->Create(kube::TrainingJobs(), ns(), Job("j"));
  ASSERT_TRUE(job.ok()) << job.status();
  const JobStatus status = EveryField();
  const Json sent = status.ToJson();
  Json updated = *job;
  updated["status"] = sent;
  absl::StatusOr<Json> written = client_->UpdateStatus(kube::TrainingJobs(), ns(), updated);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ((*written)["status"], sent);
  absl::StatusOr<Json> read = client_->Get(kube::TrainingJobs(), ns(), "j");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)["status"], sent) << "stored:  " << (*read)["status"].dump() << "\nwritten: "
                                     << sent.dump();
  EXPECT_EQ(JobStatus::FromJson((*read)["status"]), status);

  // Writing the same status again changes nothing stored: the server keeps the resourceVersion
  // (and sends no watch event), which is why the operator must not wait for one.
  Json again = *read;
  absl::StatusOr<Json> rewritten = client_->UpdateStatus(kube::TrainingJobs(), ns(), again);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_EQ(kube::ResourceVersion(*rewritten), kube::ResourceVersion(*read));
}

TEST_F(CrdApiserverTest, AStatusOutsideTheSchemaIsRefusedOrPruned) {
  absl::StatusOr<Json> job = client_->Create(kube::TrainingJobs(), ns(), Job("p"));
  ASSERT_TRUE(job.ok()) << job.status();
  Json updated = *job;
  updated["status"] = {{"workers", "1/1"}, {"notInTheSchema", 3}};
  absl::StatusOr<Json> written = client_->UpdateStatus(kube::TrainingJobs(), ns(), updated);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ((*written)["status"], (Json{{"workers", "1/1"}}));
  updated = *written;
  updated["status"]["workers"] = "one of two";  // the pattern ^[0-9]+/[0-9]+$
  written = client_->UpdateStatus(kube::TrainingJobs(), ns(), updated);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), absl::StatusCode::kInvalidArgument) << written.status();
  EXPECT_TRUE(absl::StrContains(written.status().message(), "status.workers")) << written.status();
}

TEST_F(CrdApiserverTest, EveryExampleManifestIsAcceptedWithStrictValidation) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           testing::SourceDir() + "/deploy/examples")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  ASSERT_GE(files.size(), 7u);
  for (const std::string& file : files) {
    std::string output;
    const int code =
        plane_->Kubectl({"apply", "--validate=strict", "-n", ns(), "-f", file}, &output);
    EXPECT_EQ(code, 0) << file << "\n" << output;
  }
  absl::StatusOr<kube::ObjectList> jobs = client_->List(kube::TrainingJobs(), ns(), {});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->items.size(), 12u);  // six models, CPU and GPU
}

TEST_F(CrdApiserverTest, TheChartsCrdIsTheInstalledOneAndAccepted) {
  std::string output;
  const std::string chart_crd = testing::SourceDir() + "/helm/psflow/crds/trainingjobs.psflow.io.yaml";
  EXPECT_EQ(plane_->Kubectl({"apply", "--dry-run=server", "--validate=strict", "-f", chart_crd},
                            &output),
            0)
      << output;
  // kubectl diff exits 0 when the server already holds exactly this object.
  EXPECT_EQ(plane_->Kubectl({"diff", "-f", chart_crd}, &output), 0) << output;
}

TEST_F(CrdApiserverTest, WhatTheSchemaRefusesTheServerRefuses) {
  struct Case {
    const char* what;
    std::function<void(Json&)> edit;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"negative replicas", [](Json& j) { j["spec"]["replicaSpecs"]["Worker"]["replicas"] = -1; },
       "spec.replicaSpecs.Worker.replicas"},
      {"two chiefs",
       [](Json& j) {
         j["spec"]["replicaSpecs"]["Chief"] = j["spec"]["replicaSpecs"]["PS"];
         j["spec"]["replicaSpecs"]["Chief"]["replicas"] = 2;
       },
       "spec.replicaSpecs.Chief.replicas"},
      {"an unknown restartPolicy",
       [](Json& j) { j["spec"]["replicaSpecs"]["PS"]["restartPolicy"] = "Sometimes"; },
       "spec.replicaSpecs.PS.restartPolicy"},
      {"a name too long for its Services",
       [](Json& j) { j["metadata"]["name"] = std::string(49, 'a'); }, "metadata.name"},
      {"an unknown cleanPodPolicy",
       [](Json& j) { j["spec"]["runPolicy"]["cleanPodPolicy"] = "Some"; },
       "spec.runPolicy.cleanPodPolicy"},
  };
  for (const Case& c : cases) {
    Json job = Job("refused");
    c.edit(job);
    absl::StatusOr<Json> made = client_->Create(kube::TrainingJobs(), ns(), job);
    ASSERT_FALSE(made.ok()) << c.what;
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_TRUE(absl::StrContains(made.status().message(), c.field))
        << c.what << ": " << made.status();
  }
}

}  // namespace
}  // namespace psflow
