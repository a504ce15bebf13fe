#include "tests/node/pod_targets.h"

#include <gtest/gtest.h>

namespace psflow::node {
namespace {

using Json = nlohmann::json;

TEST(SanitizeLabelName, EveryCharacterOutsideWordCharactersBecomesAnUnderscore) {
  EXPECT_EQ(SanitizeLabelName("psflow.io/job-name"), "psflow_io_job_name");
  EXPECT_EQ(SanitizeLabelName("app.kubernetes.io/name"), "app_kubernetes_io_name");
  EXPECT_EQ(SanitizeLabelName("plain_Name9"), "plain_Name9");
}

Json Pod(const std::string& ip) {
  return Json::parse(R"({
    "metadata": {"name": "job-worker-0", "namespace": "ns", "uid": "u1",
                 "labels": {"psflow.io/job-name": "job", "psflow.io/replica-type": "worker"},
                 "annotations": {"a/b": "c"},
                 "ownerReferences": [{"kind": "TrainingJob", "name": "job", "controller": true}]},
    "spec": {"nodeName": "n1", "containers": [
      {"name": "psflow", "image": "psflow/worker:0.1.0",
       "ports": [{"name": "psflow-port", "containerPort": 2222},
                 {"name": "metrics", "containerPort": 9100, "protocol": "TCP"}]},
      {"name": "sidecar", "image": "busybox"}]},
    "status": {"phase": "Running", "podIP": ")" +
                     ip + R"(", "hostIP": "10.0.0.1",
               "conditions": [{"type": "Ready", "status": "True"}]}})");
}

TEST(PodTargetGroups, OneTargetPerContainerPortAndOneForAContainerWithout) {
  const Json groups = PodTargetGroups({Pod("10.85.0.7")});
  ASSERT_EQ(groups.size(), 3u) << groups;
  EXPECT_EQ(groups[0]["targets"], Json::array({"10.85.0.7:2222"}));
  EXPECT_EQ(groups[1]["targets"], Json::array({"10.85.0.7:9100"}));
  EXPECT_EQ(groups[2]["targets"], Json::array({"10.85.0.7"}));
  const Json& metrics = groups[1]["labels"];
  EXPECT_EQ(metrics["__meta_kubernetes_namespace"], "ns");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_name"], "job-worker-0");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_phase"], "Running");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_ready"], "true");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_node_name"], "n1");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_label_psflow_io_job_name"], "job");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_labelpresent_psflow_io_replica_type"], "true");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_annotation_a_b"], "c");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_container_name"], "psflow");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_container_init"], "false");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_container_port_name"], "metrics");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_container_port_number"], "9100");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_container_port_protocol"], "TCP");
  EXPECT_EQ(metrics["__meta_kubernetes_pod_controller_kind"], "TrainingJob");
  EXPECT_FALSE(groups[2]["labels"].contains("__meta_kubernetes_pod_container_port_name"));
}

TEST(PodTargetGroups, APodWithoutAnAddressHasNoTargets) {
  EXPECT_EQ(PodTargetGroups({Pod("")}), Json::array());
}

}  // namespace
}  // namespace psflow::node
