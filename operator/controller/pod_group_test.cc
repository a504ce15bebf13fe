#include "operator/controller/pod_group.h"

#include <gtest/gtest.h>

#include "operator/controller/replica_objects.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

// 2 ps asking 500m cpu and 1Gi each, 3 workers asking 2 cpu (a limit standing in for the missing
// request) and 1.5Gi, one nvidia.com/gpu each.
json JobObject() {
  const json ps = {
      {"replicas", 2},
      {"template",
       {{"spec",
         {{"containers",
           json::array({{{"name", "psflow"},
                         {"resources", {{"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}}}},
                        {{"name", "sidecar"}}})}}}}}};
  const json worker = {
      {"replicas", 3},
      {"template",
       {{"spec",
         {{"containers", json::array({{{"name", "psflow"},
                                       {"resources",
                                        {{"limits", {{"cpu", "2"}, {"nvidia.com/gpu", 1}}},
                                         {"requests", {{"memory", "1.5Gi"}}}}}}})}}}}}};
  return {{"metadata", {{"name", "lm"}, {"namespace", "team"}, {"uid", "u-7"}}},
          {"spec", {{"replicaSpecs", {{"PS", ps}, {"Worker", worker}}}}}};
}

api::TrainingJob Parsed(api::GangScheduler gang) {
  api::TrainingJob job;
  job.name = "lm";
  job.namespace_ = "team";
  job.replica_specs[api::ReplicaType::kPS].replicas = 2;
  job.replica_specs[api::ReplicaType::kWorker].replicas = 3;
  job.run_policy.scheduling.gang = gang;
  return job;
}

constexpr char kOwner[] = R"({"apiVersion": "psflow.io/v1alpha1", "kind": "TrainingJob",
    "name": "lm", "uid": "u-7", "controller": true, "blockOwnerDeletion": true})";

TEST(PodGroup, VolcanoGetsEveryReplicaPerTaskTheSummedRequestsQueueAndPriority) {
  api::TrainingJob job = Parsed(api::GangScheduler::kVolcano);
  job.run_policy.scheduling.queue = "research";
  job.run_policy.scheduling.priority_class = "high";
  const absl::StatusOr<json> group = BuildPodGroup(JobObject(), job);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(*group, json::parse(absl::StrCat(R"({
    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
    "metadata": {"name": "lm", "namespace": "team", "labels": {"psflow.io/job-name": "lm"},
                 "ownerReferences": [)",
                                             kOwner, R"(]},
    "spec": {"minMember": 5, "minTaskMember": {"ps": 2, "worker": 3},
             "minResources": {"cpu": "7", "memory": "6979321856", "nvidia.com/gpu": "3"},
             "queue": "research", "priorityClassName": "high"}})")));
}

TEST(PodGroup, CoschedulingGetsMinMemberResourcesAndTheSchedulingTimeout) {
  api::TrainingJob job = Parsed(api::GangScheduler::kCoscheduling);
  job.run_policy.scheduling_timeout_seconds = 120;
  const absl::StatusOr<json> group = BuildPodGroup(JobObject(), job);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
  EXPECT_EQ((*group)["spec"], json::parse(R"({"minMember": 5, "scheduleTimeoutSeconds": 120,
      "minResources": {"cpu": "7", "memory": "6979321856", "nvidia.com/gpu": "3"}})"));
}

TEST(PodGroup, ARequestThatIsNoQuantityIsOneLineNamingTheField) {
  json object = JobObject();
  object["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        ["memory"] = "1 GB";
  const absl::StatusOr<json> group = BuildPodGroup(object, Parsed(api::GangScheduler::kVolcano));
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(group.status().message(),
            "spec.replicaSpecs.PS.template.spec.containers[0].resources.requests.memory: \"1 GB\" "
            "is not a quantity (unknown suffix \" GB\")");
}

TEST(PodGroup, PodsJoinByAnnotationsOrLabelAndTheGangsScheduler) {
  api::TrainingJob job = Parsed(api::GangScheduler::kVolcano);
  job.run_policy.scheduling.queue = "research";
  json metadata = {{"labels", {{"a", "b"}}}}, spec = json::object();
  JoinPodGroup(job, api::ReplicaType::kWorker, metadata, spec);
  EXPECT_EQ(spec["schedulerName"], "volcano");
  EXPECT_EQ(metadata["annotations"], json::parse(R"({"scheduling.k8s.io/group-name": "lm",
      "volcano.sh/task-spec": "worker", "scheduling.volcano.sh/queue-name": "research"})"));

  job.run_policy.scheduling = {};
  job.run_policy.scheduling.gang = api::GangScheduler::kCoscheduling;
  metadata = {{"labels", {{"a", "b"}}}};
  spec = {{"schedulerName", "default-scheduler"}};
  JoinPodGroup(job, api::ReplicaType::kPS, metadata, spec);
  EXPECT_EQ(spec["schedulerName"], "scheduler-plugins-scheduler");
  EXPECT_EQ(metadata,
            json::parse(R"({"labels": {"a": "b", "scheduling.x-k8s.io/pod-group": "lm"}})"));
  job.run_policy.scheduling.scheduler_name = "my-coscheduler";
  JoinPodGroup(job, api::ReplicaType::kPS, metadata, spec);
  EXPECT_EQ(spec["schedulerName"], "my-coscheduler");

  // No gang: nothing changes.
  job.run_policy.scheduling = {};
  json untouched = {{"schedulerName", "x"}};
  JoinPodGroup(job, api::ReplicaType::kPS, metadata, untouched);
  EXPECT_EQ(untouched, json({{"schedulerName", "x"}}));
}

// Kueue's plain-pod groups: a job labelled with a queue gives each pod the queue, the group (the
// job) and the group's size; a job without the label, nothing.
TEST(PodGroup, AJobInAKueueQueueMakesItsPodsOneKueuePodGroup) {
  json object = JobObject();
  api::TrainingJob job = Parsed(api::GangScheduler::kNone);
  json metadata = {{"labels", {{"psflow.io/job-name", "lm"}}}};
  JoinKueuePodGroup(object, job, metadata);
  EXPECT_EQ(metadata, json({{"labels", {{"psflow.io/job-name", "lm"}}}}));
  object["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "team-a"}};
  JoinKueuePodGroup(object, job, metadata);
  EXPECT_EQ(metadata, json::parse(R"({
    "labels": {"psflow.io/job-name": "lm", "kueue.x-k8s.io/queue-name": "team-a",
               "kueue.x-k8s.io/pod-group-name": "lm"},
    "annotations": {"kueue.x-k8s.io/pod-group-total-count": "5"}})"));
}

}  // namespace
}  // namespace psflow::controller
