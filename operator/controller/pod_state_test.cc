#include "operator/controller/pod_state.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace psflow::controller {
namespace {

using nlohmann::json;

// A pod made at `created` whose status says it was scheduled at `scheduled` and its main container
// ended with exit 0, as the kubelet reports a ps that stopped on SIGTERM.
json Pod(const std::string& created, const std::string& scheduled) {
  json pod = {
      {"metadata", {{"name", "j-ps-0"}, {"uid", "u2"}}},
      {"spec", {{"nodeName", "node-1"}, {"containers", json::array({{{"name", "psflow"}}})}}},
      {"status",
       {{"phase", "Succeeded"},
        {"podIP", "10.85.0.26"},
        {"conditions",
         json::array(
             {{{"type", "Ready"}, {"status", "False"}},
              {{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", scheduled}}})},
        {"containerStatuses",
         json::array(
             {{{"name", "psflow"},
               {"restartCount", 2},
               {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}}})}}}};
  if (!created.empty()) pod["metadata"]["creationTimestamp"] = created;
  return pod;
}

// Issue 31's real-node defect: a pod made again under the name of one just deleted carried the
// deleted pod's status. The API server sets both times the rule compares (creation, and the
// binding's PodScheduled), so a node's clock cannot make a pod's own status look stale.
TEST(PodState, AStatusScheduledMoreThanASecondBeforeThePodWasMadeIsAnEarlierPods) {
  struct Case {
    const char* created;
    const char* scheduled;
    bool stale;
  };
  for (const Case& c :
       {Case{"2026-12-06T16:18:55Z", "2026-12-06T16:18:44Z", true},
        Case{"2026-12-06T16:18:55Z", "2026-12-06T16:18:53Z", true},
        Case{"2026-12-06T16:18:55Z", "2026-12-06T16:18:54Z", false},
        Case{"2026-12-06T16:18:55Z", "2026-12-06T16:18:55Z", false},
        Case{"2026-12-06T16:18:55Z", "2026-12-06T16:19:30Z", false},
        Case{"", "2026-12-06T16:18:44Z", false}, Case{"2026-12-06T16:18:55Z", "", false},
        Case{"2026-12-06T16:18:55Z", "yesterday", false}}) {
    const PodState state = ReadPodState(Pod(c.created, c.scheduled));
    EXPECT_EQ(!state.stale_status.empty(), c.stale) << c.created << " " << c.scheduled;
    if (c.stale) {
      // Nothing of the earlier pod's is read as this one's.
      EXPECT_EQ(state.phase, PodPhase::kPending);
      EXPECT_FALSE(state.main_started);
      EXPECT_FALSE(state.exit_code.has_value());
      EXPECT_EQ(state.restarts, 0);
      EXPECT_TRUE(state.conditions.empty());
    } else {
      EXPECT_EQ(state.phase, PodPhase::kSucceeded);
      EXPECT_EQ(state.exit_code, 0);
      EXPECT_EQ(state.restarts, 2);
    }
  }
  EXPECT_EQ(ReadPodState(Pod("2026-12-06T16:18:55Z", "2026-12-06T16:18:44Z")).stale_status,
            "its status is an earlier pod's (phase Succeeded, exit code 0 (Completed), pod IP "
            "10.85.0.26): scheduled at 2026-12-06T16:18:44Z, before the pod was made at "
            "2026-12-06T16:18:55Z");
}

TEST(PodState, AStalePodKeepsWhatItsSpecAndMetadataSay) {
  json pod = Pod("2026-12-06T16:18:55Z", "2026-12-06T16:18:44Z");
  pod["spec"]["schedulingGates"] = json::array({{{"name", "kueue.x-k8s.io/admission"}}});
  pod["metadata"]["deletionTimestamp"] = "2026-12-06T16:19:00Z";
  pod["status"]["conditions"][0]["status"] = "True";
  pod["status"]["reason"] = "Evicted";
  const PodState state = ReadPodState(pod);
  ASSERT_FALSE(state.stale_status.empty());
  EXPECT_EQ(state.scheduling_gates, std::vector<std::string>{"kueue.x-k8s.io/admission"});
  EXPECT_TRUE(state.being_deleted);
  EXPECT_FALSE(state.ready);
  EXPECT_EQ(state.reason, "");
  EXPECT_EQ(state.message, "");
  EXPECT_EQ(state.unschedulable, "");
  EXPECT_EQ(state.main_restarts, 0);
}

// A pod on no node has run nothing: a status that says it ran, or gives it an address, is an
// earlier pod's whatever the times (seen: a gated pod, never bound, with the deleted pod's exit 0).
TEST(PodState, APodOnNoNodeThatRanHasAnEarlierPodsStatus) {
  json pod = Pod("2026-12-06T16:18:55Z", "2026-12-06T16:18:55Z");
  pod["spec"].erase("nodeName");
  pod["spec"]["schedulingGates"] = json::array({{{"name", "kueue.x-k8s.io/admission"}}});
  PodState state = ReadPodState(pod);
  EXPECT_EQ(state.stale_status,
            "its status is an earlier pod's (phase Succeeded, exit code 0 (Completed), pod IP "
            "10.85.0.26): it says the pod ran, but the pod is on no node");
  EXPECT_EQ(state.scheduling_gates, std::vector<std::string>{"kueue.x-k8s.io/admission"});
  // The address alone says so too; a Pending pod on no node, as the scheduler leaves it, does not.
  pod["status"].erase("containerStatuses");
  EXPECT_NE(ReadPodState(pod).stale_status, "");
  pod["status"] = {
      {"phase", "Pending"},
      {"conditions",
       json::array(
           {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "SchedulingGated"}}})}};
  state = ReadPodState(pod);
  EXPECT_EQ(state.stale_status, "");
  EXPECT_EQ(state.phase, PodPhase::kPending);
}

// A pod made with spec.nodeName set is never bound: its kubelet adds PodScheduled by the node's
// clock, which may be behind the API server's. Its maker owns spec.nodeName in managedFields (a
// binding owns nothing there), and such a pod is not judged by the times.
TEST(PodState, APodWhoseMakerNamedItsNodeIsNotJudgedByTheTimes) {
  json pod = Pod("2026-12-06T16:18:55Z", "2026-12-06T16:18:44Z");
  pod["spec"]["nodeName"] = "gpu-7";
  pod["metadata"]["managedFields"] =
      json::array({{{"manager", "psflow-operator"},
                    {"operation", "Update"},
                    {"fieldsV1", {{"f:spec", {{"f:nodeName", json::object()}}}}}},
                   {{{"manager", "kubelet"}, {"operation", "Update"}, {"subresource", "status"}}}});
  EXPECT_EQ(ReadPodState(pod).stale_status, "");
  EXPECT_EQ(ReadPodState(pod).phase, PodPhase::kSucceeded);
  // Bound by a scheduler: the maker's entry has no nodeName.
  pod["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"].erase("f:nodeName");
  EXPECT_NE(ReadPodState(pod).stale_status, "");
}

TEST(PodState, OnlyATruePodScheduledConditionDates) {
  json pod = Pod("2026-12-06T16:18:55Z", "2026-12-06T16:18:44Z");
  // The scheduler's PodScheduled False (Unschedulable, SchedulingGated) is not the binding's.
  pod["status"]["conditions"][1]["status"] = "False";
  EXPECT_EQ(ReadPodState(pod).stale_status, "");
  pod["status"]["conditions"].erase(1);
  EXPECT_EQ(ReadPodState(pod).stale_status, "");
}

}  // namespace
}  // namespace psflow::controller
