// For the controller's tests: a TrainingJob with one ps and one worker, as its JSON object and as
// parsed, to build pods from with BuildPod.
#ifndef PSFLOW_OPERATOR_CONTROLLER_TEST_JOBS_H_
#define PSFLOW_OPERATOR_CONTROLLER_TEST_JOBS_H_

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "operator/api/training_job.h"

namespace psflow::controller {

struct TestJob {
  nlohmann::json object;
  api::TrainingJob parsed;
};

// The PS template is `ps_template` (with spec.replicaSpecs.PS.checkpoint `ps_checkpoint`, JSON or
// YAML flow, when not empty); the worker's is a bare container. TLS is off: its mount and flags
// are job_certificates' (reconciler_test covers them). A job that does not parse fails the test.
inline TestJob MakeTestJob(const nlohmann::json& ps_template,
                           const std::string& ps_checkpoint = "") {
  using nlohmann::json;
  const json worker_template = {
      {"spec", {{"containers", json::array({{{"name", "psflow"}, {"image", "w"}}})}}}};
  json object = {{"apiVersion", "psflow.io/v1alpha1"},
                 {"kind", "TrainingJob"},
                 {"metadata", {{"name", "j"}, {"namespace", "ns"}, {"uid", "u-1"}}}};
  object["spec"]["replicaSpecs"]["PS"] = {{"replicas", 1}, {"template", ps_template}};
  object["spec"]["replicaSpecs"]["Worker"] = {{"replicas", 1}, {"template", worker_template}};
  object["spec"]["tls"] = {{"enabled", false}};
  if (!ps_checkpoint.empty()) {
    object["spec"]["replicaSpecs"]["PS"]["checkpoint"] = json::parse(ps_checkpoint);
  }
  auto parsed = api::ParseTrainingJob(object.dump(), "test");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return {object, parsed.value_or(api::TrainingJob())};
}

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_TEST_JOBS_H_
