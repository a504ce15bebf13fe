#include "operator/api/cluster_spec_builder.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace psflow::api {
namespace {

TEST(ClusterSpecBuilder, EveryReplicaTypeInTensorFlowNames) {
  TrainingJob job;
  job.name = "mnist";
  job.replica_specs[ReplicaType::kPS].replicas = 2;
  job.replica_specs[ReplicaType::kWorker].replicas = 3;
  job.replica_specs[ReplicaType::kChief].replicas = 1;
  job.replica_specs[ReplicaType::kEvaluator].replicas = 0;
  const ClusterSpec cluster = BuildClusterSpec(
      job, [&](ReplicaType t, int i) { return absl::StrCat(ReplicaName(job, t, i), ":2222"); });
  EXPECT_EQ(cluster.Tasks("ps"), (std::vector<std::string>{"mnist-ps-0:2222", "mnist-ps-1:2222"}));
  EXPECT_EQ(cluster.Tasks("worker").size(), 3u);
  EXPECT_EQ(cluster.Tasks("chief"), std::vector<std::string>{"mnist-chief-0:2222"});
  EXPECT_EQ(cluster.cluster.count("evaluator"), 0u);

  const ClusterSpec w2 = ForTask(cluster, ReplicaType::kWorker, 2);
  EXPECT_EQ(w2.task, (TaskId{"worker", 2}));
  EXPECT_FALSE(w2.IsChief());  // a Chief exists
  auto parsed = ParseTfConfig(ToTfConfig(w2));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, w2);
}

}  // namespace
}  // namespace psflow::api
