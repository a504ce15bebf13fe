#include "operator/controller/network_policy.h"

#include "absl/strings/str_cat.h"
#include "operator/controller/replica_objects.h"
#include "operator/kube/resource.h"

namespace psflow::controller {

using nlohmann::json;

std::string NetworkPolicyName(const std::string& job_name) {
  return absl::StrCat(job_name, "-network");
}

json BuildNetworkPolicy(const json& job_object, const api::TrainingJob& job) {
  const json job_pods = {{"matchLabels", {{kJobNameLabel, job.name}}}};
  // The schema and the parser admit only a list of objects here.
  json metrics_from = json::array({{{"podSelector", json::object()}}});
  if (job_object.contains("spec") && job_object["spec"].contains("networkPolicy")) {
    const json& policy = job_object["spec"]["networkPolicy"];
    if (policy.contains("metricsFrom") && policy["metricsFrom"].is_array()) {
      metrics_from = policy["metricsFrom"];
    }
  }
  json labels = {{kJobNameLabel, job.name}};
  return {
      {"apiVersion", kube::NetworkPolicies().ApiVersion()},
      {"kind", kube::NetworkPolicies().kind},
      {"metadata",
       {{"name", NetworkPolicyName(job.name)},
        {"namespace", job.namespace_},
        {"labels", std::move(labels)},
        {"ownerReferences", json::array({JobOwnerReference(job_object, job)})}}},
      {"spec",
       {{"podSelector", job_pods},
        {"policyTypes", {"Ingress"}},
        {"ingress",
         json::array(
             {{{"from", json::array({{{"podSelector", job_pods}}})},
               {"ports", json::array({{{"protocol", "TCP"}, {"port", api::kPortName}},
                                      {{"protocol", "TCP"}, {"port", api::kBulkPortName}}})}},
              {{"from", std::move(metrics_from)},
               {"ports", json::array({{{"protocol", "TCP"}, {"port", kMetricsPortName}}})}}})}}}};
}

}  // namespace psflow::controller
