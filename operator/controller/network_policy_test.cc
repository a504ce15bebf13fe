#include "operator/controller/network_policy.h"

#include <gtest/gtest.h>

namespace psflow::controller {
namespace {

using nlohmann::json;

json JobObject(json network_policy) {
  return {{"metadata", {{"name", "lm"}, {"namespace", "team"}, {"uid", "u-7"}}},
          {"spec", {{"networkPolicy", std::move(network_policy)}}}};
}

api::TrainingJob Parsed() {
  api::TrainingJob job;
  job.name = "lm";
  job.namespace_ = "team";
  job.network_policy.enabled = true;
  return job;
}

TEST(NetworkPolicy, AdmitsThePsPortFromTheJobAndMetricsFromTheNamespace) {
  const json policy = BuildNetworkPolicy(JobObject({{"enabled", true}}), Parsed());
  EXPECT_EQ(policy, json::parse(R"({
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {
      "name": "lm-network", "namespace": "team", "labels": {"psflow.io/job-name": "lm"},
      "ownerReferences": [{"apiVersion": "psflow.io/v1alpha1", "kind": "TrainingJob",
        "name": "lm", "uid": "u-7", "controller": true, "blockOwnerDeletion": true}]},
    "spec": {
      "podSelector": {"matchLabels": {"psflow.io/job-name": "lm"}},
      "policyTypes": ["Ingress"],
      "ingress": [
        {"from": [{"podSelector": {"matchLabels": {"psflow.io/job-name": "lm"}}}],
         "ports": [{"protocol": "TCP", "port": "psflow-port"},
                   {"protocol": "TCP", "port": "psflow-bulk"}]},
        {"from": [{"podSelector": {}}],
         "ports": [{"protocol": "TCP", "port": "metrics"}]}]}})"));
}

TEST(NetworkPolicy, MetricsFromPassesThrough) {
  const json from = json::parse(R"([
    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
    {"ipBlock": {"cidr": "10.0.0.0/8"}}])");
  const json policy =
      BuildNetworkPolicy(JobObject({{"enabled", true}, {"metricsFrom", from}}), Parsed());
  EXPECT_EQ(policy["spec"]["ingress"][1]["from"], from);
  EXPECT_EQ(policy["spec"]["ingress"][1]["ports"],
            json::parse(R"([{"protocol": "TCP", "port": "metrics"}])"));
}

}  // namespace
}  // namespace psflow::controller
