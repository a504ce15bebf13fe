// What BuildPod adds for the restricted Pod Security Standard and for a ps's checkpoint volume.
#include "operator/controller/pod_security.h"

#include <gtest/gtest.h>

#include "operator/api/training_job.h"
#include "operator/controller/checkpoint_volume.h"
#include "operator/controller/replica_objects.h"
#include "operator/controller/test_jobs.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

json PsTemplate(json containers) { return {{"spec", {{"containers", std::move(containers)}}}}; }

TEST(PodSecurity, APlainTemplateGetsTheRestrictedProfileAndAWritableTmp) {
  const TestJob job = MakeTestJob(PsTemplate(
      json::array({{{"name", "sidecar"}, {"image", "s"}}, {{"name", "psflow"}, {"image", "p"}}})));
  const json spec = BuildPod(job.object, job.parsed, api::ReplicaType::kPS, 0)["spec"];
  EXPECT_EQ(spec["securityContext"], json::parse(R"({"runAsNonRoot": true, "runAsUser": 65532,
      "runAsGroup": 65532, "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}})"));
  EXPECT_EQ(
      spec["containers"][0]["securityContext"],
      json::parse(R"({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})"));
  EXPECT_FALSE(spec["containers"][0].contains("volumeMounts"));
  EXPECT_EQ(spec["containers"][1]["securityContext"],
            json::parse(R"({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                            "readOnlyRootFilesystem": true})"));
  EXPECT_EQ(spec["containers"][1]["volumeMounts"],
            json::parse(R"([{"name": "psflow-tmp", "mountPath": "/tmp"}])"));
  EXPECT_EQ(spec["volumes"], json::parse(R"([{"name": "psflow-tmp", "emptyDir": {}}])"));
}

TEST(PodSecurity, WhatTheTemplateSetsStaysAsTheTemplateSetsIt) {
  json tmpl =
      PsTemplate(json::array({{{"name", "psflow"},
                               {"image", "p"},
                               {"securityContext", {{"readOnlyRootFilesystem", false}}},
                               {"volumeMounts", {{{"name", "scratch"}, {"mountPath", "/tmp"}}}}}}));
  tmpl["spec"]["securityContext"] = {{"runAsUser", 1000}};
  tmpl["spec"]["initContainers"] = json::array({{{"name", "init"}, {"image", "i"}}});
  tmpl["spec"]["volumes"] =
      json::array({{{"name", "scratch"}, {"emptyDir", {{"medium", "Memory"}}}}});
  const TestJob job = MakeTestJob(tmpl);
  const json spec = BuildPod(job.object, job.parsed, api::ReplicaType::kPS, 0)["spec"];
  EXPECT_EQ(spec["securityContext"]["runAsUser"], 1000);
  EXPECT_EQ(spec["securityContext"]["runAsGroup"], 65532);
  EXPECT_EQ(spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"], false);
  EXPECT_EQ(spec["containers"][0]["volumeMounts"],
            json::parse(R"([{"name": "scratch", "mountPath": "/tmp"}])"));
  EXPECT_EQ(spec["volumes"],
            json::parse(R"([{"name": "scratch", "emptyDir": {"medium": "Memory"}}])"));
  EXPECT_EQ(
      spec["initContainers"][0]["securityContext"],
      json::parse(R"({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})"));
}

TEST(CheckpointVolume, AnEmptyDirWithItsLimitIsMountedAndPassedToThePs) {
  const TestJob job =
      MakeTestJob(PsTemplate(json::array({{{"name", "psflow"},
                                           {"image", "p"},
                                           {"command", {"psflow-ps"}},
                                           {"args", {"--checkpoint_every_s=30"}}}})),
                  R"({"sizeLimit": "1Gi"})");
  const json spec = BuildPod(job.object, job.parsed, api::ReplicaType::kPS, 0)["spec"];
  EXPECT_EQ(spec["volumes"], json::parse(R"([
      {"name": "psflow-checkpoints", "emptyDir": {"sizeLimit": "1Gi"}},
      {"name": "psflow-tmp", "emptyDir": {}}])"));
  EXPECT_EQ(spec["containers"][0]["volumeMounts"], json::parse(R"([
      {"name": "psflow-checkpoints", "mountPath": "/var/lib/psflow/checkpoints"},
      {"name": "psflow-tmp", "mountPath": "/tmp"}])"));
  EXPECT_EQ(spec["containers"][0]["args"], json::parse(R"(["--checkpoint_every_s=30",
                            "--checkpoint_dir=/var/lib/psflow/checkpoints"])"));
  // The worker has no checkpoint volume.
  const json worker = BuildPod(job.object, job.parsed, api::ReplicaType::kWorker, 0)["spec"];
  EXPECT_EQ(worker["volumes"], json::parse(R"([{"name": "psflow-tmp", "emptyDir": {}}])"));
  EXPECT_FALSE(worker["containers"][0].contains("args"));
}

TEST(CheckpointVolume, AClaimIsMountedAndItsFlagWinsOverTheTemplates) {
  const TestJob job = MakeTestJob(
      PsTemplate(json::array(
          {{{"name", "psflow"}, {"image", "p"}, {"args", {"--checkpoint_dir=/elsewhere"}}}})),
      R"({"volume": "persistentVolumeClaim", "claimName": "ckpt"})");
  const json spec = BuildPod(job.object, job.parsed, api::ReplicaType::kPS, 0)["spec"];
  EXPECT_EQ(spec["volumes"][0], json::parse(R"(
      {"name": "psflow-checkpoints", "persistentVolumeClaim": {"claimName": "ckpt"}})"));
  EXPECT_EQ(spec["containers"][0]["args"].back(), "--checkpoint_dir=/var/lib/psflow/checkpoints");
}

}  // namespace
}  // namespace psflow::controller
