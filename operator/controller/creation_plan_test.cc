#include "operator/controller/creation_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace psflow::controller {
namespace {

using api::ReplicaType;

TEST(SlowStartBatches, DoubleUntilWhatIsLeft) {
  struct Row {
    size_t count;
    std::vector<size_t> batches;
  };
  for (const Row& row :
       {Row{0, {}}, Row{1, {1}}, Row{2, {1, 1}}, Row{3, {1, 2}}, Row{4, {1, 2, 1}},
        Row{7, {1, 2, 4}}, Row{8, {1, 2, 4, 1}}, Row{500, {1, 2, 4, 8, 16, 32, 64, 128, 245}}}) {
    EXPECT_EQ(SlowStartBatches(row.count), row.batches) << row.count;
  }
}

TEST(PlanCreation, WhatThePodsNeedComesFirstInOrderAndOnlyWhenPodsAreMade) {
  using O = JobObject;
  struct Row {
    const char* what;
    bool service_missing;
    int missing_pods;
    bool tls = true;
    bool network_policy = false;
    api::GangScheduler gang = api::GangScheduler::kNone;
    bool model_file = false;
    std::vector<JobObject> before_pods;
  };
  const Row rows[] = {
      {"nothing missing", false, 0, true, true, api::GangScheduler::kVolcano, true, {}},
      {"only the Service", true, 0, true, true, api::GangScheduler::kVolcano, true, {O::kService}},
      {"pods of a plain job",
       false,
       3,
       true,
       false,
       api::GangScheduler::kNone,
       false,
       {O::kTlsSecrets}},
      {"everything",
       true,
       3,
       true,
       true,
       api::GangScheduler::kCoscheduling,
       true,
       {O::kService, O::kNetworkPolicy, O::kPodGroup, O::kTlsSecrets, O::kModelConfigMap}},
      {"TLS opted out warns instead",
       false,
       1,
       false,
       false,
       api::GangScheduler::kNone,
       true,
       {O::kTlsDisabled, O::kModelConfigMap}},
  };
  for (const Row& row : rows) {
    api::TrainingJob job;
    job.tls = row.tls;
    job.network_policy.enabled = row.network_policy;
    job.run_policy.scheduling.gang = row.gang;
    if (row.model_file) job.model_file = "layers: []";
    std::vector<ReplicaSlot> missing;
    for (int i = 0; i < row.missing_pods; ++i) missing.push_back({ReplicaType::kWorker, i});
    const CreationPlan plan = PlanCreation(job, row.service_missing, missing, 500);
    EXPECT_EQ(plan.before_pods, row.before_pods) << row.what;
    EXPECT_EQ(plan.pods, missing) << row.what;
    EXPECT_FALSE(plan.more_pods) << row.what;
  }
}

TEST(PlanCreation, AtMostMaxPodsInSlowStartBatchesTheRestNextPass) {
  api::TrainingJob job;
  std::vector<ReplicaSlot> missing = {{ReplicaType::kPS, 0}};
  for (int i = 0; i < 9; ++i) missing.push_back({ReplicaType::kWorker, i});
  const CreationPlan plan = PlanCreation(job, false, missing, 6);
  ASSERT_EQ(plan.pods.size(), 6u);
  EXPECT_EQ(plan.pods.front(), (ReplicaSlot{ReplicaType::kPS, 0}));
  EXPECT_EQ(plan.pods.back(), (ReplicaSlot{ReplicaType::kWorker, 4}));
  EXPECT_EQ(plan.batches, (std::vector<size_t>{1, 2, 3}));
  EXPECT_TRUE(plan.more_pods);
  // A cap below one still makes progress.
  EXPECT_EQ(PlanCreation(job, false, missing, 0).pods.size(), 1u);
}

}  // namespace
}  // namespace psflow::controller
