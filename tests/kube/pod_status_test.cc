// The kubelet stand-ins of ObjectStore and the statuses they write.
#include "tests/kube/pod_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/kube/object_store.h"
#include "tests/kube/store_test_util.h"
#include "tests/kube/verbs.h"

namespace psflow::kubetest {
namespace {

using ::testing::MatchesRegex;

using kube::Pods;

class PodStatusTest : public StoreTest {};

TEST_F(PodStatusTest, PodPhasesLookAsTheKubeletWritesThem) {
  Json pod = PodObject("p");
  pod["spec"]["containers"].push_back({{"name", "sidecar"}, {"image", "busybox"}});
  MustCreate(Pods(), pod);

  Json status = (*store_.SetPodPhase("default", "p", "Pending"))["status"];
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_EQ(status["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating");
  EXPECT_FALSE(status.contains("podIP"));

  status = (*store_.SetPodPhase("default", "p", "Running"))["status"];
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["startTime"], "2024-05-01T12:00:00Z");
  EXPECT_THAT(status["podIP"].get<std::string>(), MatchesRegex("10\\.244\\.[0-9]+\\.[0-9]+"));
  ASSERT_EQ(status["containerStatuses"].size(), 2u);
  for (const Json& c : status["containerStatuses"]) {
    EXPECT_EQ(c["state"]["running"]["startedAt"], "2024-05-01T12:00:00Z");
    EXPECT_EQ(c["ready"], true);
    EXPECT_EQ(c["restartCount"], 0);
  }
  EXPECT_EQ(status["containerStatuses"][0]["name"], "worker");
  EXPECT_EQ(status["containerStatuses"][1]["name"], "sidecar");
  EXPECT_EQ(status["containerStatuses"][1]["image"], "busybox");
  const Json ready = status["conditions"][1];
  EXPECT_EQ(ready["type"], "Ready");
  EXPECT_EQ(ready["status"], "True");

  status = (*store_.SetPodPhase("default", "p", "Failed", 137, "OOMKilled"))["status"];
  EXPECT_EQ(status["phase"], "Failed");
  const Json terminated = status["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(terminated["exitCode"], 137);
  EXPECT_EQ(terminated["reason"], "OOMKilled");
  EXPECT_EQ(terminated["finishedAt"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(status["containerStatuses"][0]["ready"], false);
  EXPECT_FALSE(status.contains("reason"));
  // Kubelet writes are writes, not calls of the operator.
  EXPECT_EQ(store_.WriteCount(), 4);
  EXPECT_EQ(store_.OperationCount(verb::kUpdateStatus), 0);
}

TEST_F(PodStatusTest, TerminalPhasesPickTheKubeletsReasons) {
  for (const char* name : {"ok", "error", "evicted", "bad"}) MustCreate(Pods(), PodObject(name));
  auto terminated = [](const Json& pod) {
    return pod["status"]["containerStatuses"][0]["state"]["terminated"];
  };
  const Json ok = *store_.SetPodPhase("default", "ok", "Succeeded");
  EXPECT_EQ(terminated(ok)["reason"], "Completed");
  EXPECT_EQ(terminated(ok)["exitCode"], 0);
  EXPECT_EQ(terminated(*store_.SetPodPhase("default", "error", "Failed", 1))["reason"], "Error");
  const Json evicted = *store_.SetPodPhase("default", "evicted", "Failed", 137, "Evicted");
  EXPECT_EQ(evicted["status"]["phase"], "Failed");
  EXPECT_EQ(evicted["status"]["reason"], "Evicted");
  EXPECT_EQ(evicted["status"]["message"], "The node was low on resource: memory. ");
  EXPECT_EQ(terminated(evicted)["exitCode"], 137);
  EXPECT_EQ(terminated(evicted)["reason"], "Error");

  EXPECT_EQ(store_.SetPodPhase("default", "bad", "Succeeded", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.SetPodPhase("default", "bad", "Running", 0, "Evicted").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.SetPodPhase("default", "bad", "Done").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.SetPodPhase("default", "missing", "Running").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(PodStatusTest, RestartContainerCountsRestarts) {
  MustCreate(Pods(), PodObject("p"));
  ASSERT_TRUE(store_.SetPodPhase("default", "p", "Running").ok());
  ASSERT_TRUE(store_.RestartContainer("default", "p", 1, "Error").ok());
  const Json pod = *store_.RestartContainer("default", "p", 137, "OOMKilled");
  const Json c = pod["status"]["containerStatuses"][0];
  EXPECT_EQ(c["restartCount"], 2);
  EXPECT_EQ(c["lastState"]["terminated"]["exitCode"], 137);
  EXPECT_EQ(c["lastState"]["terminated"]["reason"], "OOMKilled");
  EXPECT_EQ(c["state"]["running"]["startedAt"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(c["ready"], true);
  EXPECT_EQ(pod["status"]["phase"], "Running");
  // Later phases keep the count.
  EXPECT_EQ((*store_.SetPodPhase("default", "p", "Failed",
                                 1))["status"]["containerStatuses"][0]["restartCount"],
            2);
  EXPECT_EQ(store_.RestartContainer("default", "p", 1, "", "nope").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PodStatusTest, RestartPolicyDecidesWhetherTheKubeletRestarts) {
  MustCreate(Pods(), PodObject("never", {}, "Never"));
  MustCreate(Pods(), PodObject("on-failure", {}, "OnFailure"));
  EXPECT_EQ(store_.RestartContainer("default", "never", 1, "Error").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.RestartContainer("default", "on-failure", 0, "Completed").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_.RestartContainer("default", "on-failure", 1, "Error").ok());
}
}  // namespace
}  // namespace psflow::kubetest
