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
      {"spec", {{"containers", json::array({{{"name", "psflow"}}})}}},
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
            "its status is an earlier pod's (phase Succeeded, pod IP 10.85.0.26): scheduled at "
            "2026-12-06T16:18:44Z, before the pod was made at 2026-12-06T16:18:55Z");
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
