// The TrainingJob CRD on a real Kubernetes API server (tests/control_plane): every status field the
// operator writes is stored as written (a field the schema does not declare is pruned, and the
// operator would then never see its own write), every example manifest and the chart's copy of
// the CRD are accepted with kubectl's strict validation, and what the schema refuses is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
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
using ::testing::EndsWith;

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

// A status with every field JobStatus can hold set, each to a value the operator can produce, and
// every condition type (the CRD enumerates them: one it lacks refuses every status write).
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
  s.SetCondition(ConditionType::kProgressLost, true, "NoCheckpoint",
                 "PS 0 (pod j-ps-0) was restarted in place after exit code 137 (OOMKilled) and "
                 "lost its training progress",
                 t0 + absl::Seconds(6));
  s.SetCondition(ConditionType::kUnschedulable, true, "Unschedulable",
                 "Worker 1 (pod j-worker-1): 0/1 nodes are available: 1 Insufficient cpu.",
                 t0 + absl::Seconds(7));
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
    replaced.replaced_pod_uid = "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e";
    replaced.counted_pod_uid = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b";
    replaced.last_failure =
        ReplicaFailure{"OOMKilled", 137, "the container ran out of memory", "j-worker-1",
                       controller::FormatTimestamp(t0 + absl::Seconds(n))};
    IndexStatus& evicted = rs.indexes[5];
    evicted.restarts = 1 + n;
    evicted.last_failure =
        ReplicaFailure{"Evicted", std::nullopt, "The node was low on resource: memory.",
                       "j-worker-5", controller::FormatTimestamp(t0)};
    if (type == api::ReplicaType::kPS) {
      rs.observed_pods[0] = {"4f7c2a9e-1b3d-4e5f-8a6b-0c1d2e3f4a5b", 2};
      rs.observed_pods[1] = {"9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", 0};
    }
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

class CrdApiserverTest : public kubereal::RealApiserverTest {
 protected:
  CrdApiserverTest() : RealApiserverTest("crd") {}
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
  EXPECT_EQ((*read)["status"], sent)
      << "stored:  " << (*read)["status"].dump() << "\nwritten: " << sent.dump();
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
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(testing::SourceDir() + "/deploy/examples")) {
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
  EXPECT_EQ(jobs->items.size(), 14u);  // seven examples, CPU and GPU
}

TEST_F(CrdApiserverTest, TheChartsCrdIsTheInstalledOneAndAccepted) {
  std::string output;
  const std::string chart_crd =
      testing::SourceDir() + "/helm/psflow/crds/trainingjobs.psflow.io.yaml";
  EXPECT_EQ(
      plane_->Kubectl({"apply", "--dry-run=server", "--validate=strict", "-f", chart_crd}, &output),
      0)
      << output;
  // kubectl diff exits 0 when the server already holds exactly this object.
  EXPECT_EQ(plane_->Kubectl({"diff", "-f", chart_crd}, &output), 0) << output;
}

// What the schema refuses, with the API server's own message (kubectl shows it as it is).
TEST_F(CrdApiserverTest, WhatTheSchemaRefusesTheServerRefusesInItsOwnWords) {
  struct Case {
    const char* what;
    std::function<void(Json&)> edit;
    std::string message;  // after "TrainingJob.psflow.io \"<name>\" is invalid: "
  };
  const std::vector<Case> cases = {
      {"two chiefs",
       [](Json& j) {
         j["spec"]["replicaSpecs"]["Chief"] = j["spec"]["replicaSpecs"]["Worker"];
         j["spec"]["replicaSpecs"]["Chief"]["replicas"] = 2;
       },
       "spec.replicaSpecs.Chief.replicas: Invalid value: 2: spec.replicaSpecs.Chief.replicas in "
       "body should be less than or equal to 1"},
      {"negative ps", [](Json& j) { j["spec"]["replicaSpecs"]["PS"]["replicas"] = -1; },
       "spec.replicaSpecs.PS.replicas: Invalid value: -1: spec.replicaSpecs.PS.replicas in body "
       "should be greater than or equal to 0"},
      {"negative workers, also refused by the scale subresource",
       [](Json& j) { j["spec"]["replicaSpecs"]["Worker"]["replicas"] = -1; },
       "[spec.replicaSpecs.Worker.replicas: Invalid value: -1: spec.replicaSpecs.Worker.replicas "
       "in body should be greater than or equal to 0, .spec.replicaSpecs.Worker.replicas: Invalid "
       "value: -1: should be a non-negative integer]"},
      {"too many ps tasks", [](Json& j) { j["spec"]["replicaSpecs"]["PS"]["replicas"] = 101; },
       "spec.replicaSpecs.PS.replicas: Invalid value: 101: spec.replicaSpecs.PS.replicas in body "
       "should be less than or equal to 100"},
      {"too many workers", [](Json& j) { j["spec"]["replicaSpecs"]["Worker"]["replicas"] = 1001; },
       "spec.replicaSpecs.Worker.replicas: Invalid value: 1001: "
       "spec.replicaSpecs.Worker.replicas in body should be less than or equal to 1000"},
      {"an unknown restartPolicy",
       [](Json& j) { j["spec"]["replicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"; },
       "spec.replicaSpecs.Worker.restartPolicy: Unsupported value: \"Sometimes\": supported "
       "values: \"Never\", \"OnFailure\", \"Always\", \"ExitCode\""},
      {"a cleanPodPolicy typo",
       [](Json& j) { j["spec"]["runPolicy"]["cleanPodPolicy"] = "Runing"; },
       "spec.runPolicy.cleanPodPolicy: Unsupported value: \"Runing\": supported values: "
       "\"Running\", \"All\", \"None\""},
      // One case, one error: the server lists several in the order of a Go map.
      {"an unknown successPolicy", [](Json& j) { j["spec"]["successPolicy"] = "AnyWorker"; },
       "spec.successPolicy: Unsupported value: \"AnyWorker\": supported values: \"\", "
       "\"ChiefOrWorker0\", \"AllWorkers\""},
      {"a negative deadline", [](Json& j) { j["spec"]["runPolicy"]["activeDeadlineSeconds"] = -5; },
       "spec.runPolicy.activeDeadlineSeconds: Invalid value: -5: "
       "spec.runPolicy.activeDeadlineSeconds in body should be greater than or equal to 0"},
      {"replicas as a string", [](Json& j) { j["spec"]["replicaSpecs"]["PS"]["replicas"] = "two"; },
       "spec.replicaSpecs.PS.replicas: Invalid value: \"string\": spec.replicaSpecs.PS.replicas "
       "in body must be of type integer: \"string\""},
      {"replicas not an integer",
       [](Json& j) { j["spec"]["replicaSpecs"]["PS"]["replicas"] = 2.5; },
       "spec.replicaSpecs.PS.replicas: Invalid value: \"number\": spec.replicaSpecs.PS.replicas "
       "in body must be of type integer: \"number\""},
      {"a template that is not an object",
       [](Json& j) { j["spec"]["replicaSpecs"]["Worker"]["template"] = "psflow/worker:0.1.0"; },
       "spec.replicaSpecs.Worker.template: Invalid value: \"string\": "
       "spec.replicaSpecs.Worker.template in body must be of type object: \"string\""},
      {"no spec", [](Json& j) { j.erase("spec"); }, "spec: Required value"},
      {"no replicaSpecs", [](Json& j) { j["spec"].erase("replicaSpecs"); },
       "spec.replicaSpecs: Required value"},
  };
  for (const Case& c : cases) {
    Json job = Job("refused");
    c.edit(job);
    absl::StatusOr<Json> made = client_->Create(kube::TrainingJobs(), ns(), job);
    ASSERT_FALSE(made.ok()) << c.what;
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(std::string(made.status().message()),
                EndsWith(": TrainingJob.psflow.io \"refused\" is invalid: " + c.message))
        << c.what;
  }
}

TEST_F(CrdApiserverTest, JobNamesFitTheirServiceNames) {
  Json job = Job(std::string(49, 'a'));
  absl::StatusOr<Json> made = client_->Create(kube::TrainingJobs(), ns(), job);
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(std::string(made.status().message()),
              EndsWith("TrainingJob.psflow.io \"" + std::string(49, 'a') +
                       "\" is invalid: metadata.name: Too long: may not be longer than 48"));
  made = client_->Create(kube::TrainingJobs(), ns(), Job("9lives"));
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(std::string(made.status().message()),
              EndsWith("TrainingJob.psflow.io \"9lives\" is invalid: metadata.name: Invalid "
                       "value: \"9lives\": metadata.name in body should match "
                       "'^[a-z]([-a-z0-9]*[a-z0-9])?$'"));
  EXPECT_TRUE(client_->Create(kube::TrainingJobs(), ns(), Job(std::string(48, 'a'))).ok());
}

// A scale of a job without Workers (a chief and ps only) would write a Worker of replicas alone,
// which the operator cannot run: the API server refuses it (every replica type needs its
// template), and the job stays as it was.
TEST_F(CrdApiserverTest, ScalingAJobWithoutWorkersIsRefused) {
  Json job = Job("chiefly");
  job["spec"]["replicaSpecs"]["Chief"] = job["spec"]["replicaSpecs"]["Worker"];
  job["spec"]["replicaSpecs"].erase("Worker");
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  std::string output;
  EXPECT_NE(plane_->Kubectl({"scale", "-n", ns(), "tj/chiefly", "--replicas=2"}, &output), 0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "spec.replicaSpecs.Worker.template: Required value"))
      << output;
  absl::StatusOr<Json> stored = client_->Get(kube::TrainingJobs(), ns(), "chiefly");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_FALSE((*stored)["spec"]["replicaSpecs"].contains("Worker")) << (*stored)["spec"];
}

// Unknown fields are dropped (the template keeps everything), absent replicas are defaulted so
// the scale subresource always finds Worker.replicas, and `kubectl scale` works.
TEST_F(CrdApiserverTest, PruningDefaultingAndTheScaleSubresource) {
  Json job = Job("shape");
  job["spec"]["priority"] = "high";
  job["spec"]["runPolicy"]["retries"] = 3;
  job["spec"]["replicaSpecs"]["Worker"].erase("replicas");
  job["spec"]["replicaSpecs"]["PS"]["replicas"] = nullptr;
  job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["madeUpField"] = {{"a", 1}};
  absl::StatusOr<Json> made = client_->Create(kube::TrainingJobs(), ns(), job);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_FALSE((*made)["spec"].contains("priority"));
  EXPECT_FALSE((*made)["spec"]["runPolicy"].contains("retries"));
  EXPECT_EQ((*made)["spec"]["replicaSpecs"]["Worker"]["replicas"], 1);
  EXPECT_EQ((*made)["spec"]["replicaSpecs"]["PS"]["replicas"], 1);
  EXPECT_EQ((*made)["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["madeUpField"],
            (Json{{"a", 1}}));
  std::string output;
  ASSERT_EQ(plane_->Kubectl({"scale", "-n", ns(), "tj/shape", "--replicas=3"}, &output), 0)
      << output;
  absl::StatusOr<Json> scaled = client_->Get(kube::TrainingJobs(), ns(), "shape");
  ASSERT_TRUE(scaled.ok());
  EXPECT_EQ((*scaled)["spec"]["replicaSpecs"]["Worker"]["replicas"], 3);
  // The printer columns, as kubectl shows them.
  ASSERT_EQ(plane_->Kubectl({"get", "-n", ns(), "tj", "shape"}, &output), 0) << output;
  const std::vector<std::string> lines = absl::StrSplit(output, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << output;
  EXPECT_EQ(
      std::vector<std::string>(absl::StrSplit(lines[0], ' ', absl::SkipEmpty())),
      (std::vector<std::string>{"NAME", "STATE", "WORKERS", "PS", "WORDS/S", "EXAMPLES/S", "AGE"}));
  // No status yet (no operator here): the name, PS 1 and the age.
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(lines[1], ' ', absl::SkipEmpty())).size(), 3u)
      << lines[1];
}

}  // namespace
}  // namespace psflow
