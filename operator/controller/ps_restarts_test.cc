// Which ps restarts lose the training progress, told once each, from pods as the API shows them.
#include "operator/controller/ps_restarts.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace psflow::controller {
namespace {

using nlohmann::json;

constexpr char kNoCheckpoint[] = "";
constexpr char kEmptyDir[] = R"({"emptyDir": {}})";
constexpr char kClaim[] = R"({"persistentVolumeClaim": {"claimName": "ckpt"}})";

// Pod j-ps-<index> with uid `uid` in `phase`; its main container restarted `restarts` times (the
// last time after exit code 137, OOMKilled). `volume`: the checkpoint volume (none: no flag).
json PsPod(int index, const std::string& uid, const std::string& phase, int restarts,
           const std::string& volume = kNoCheckpoint) {
  json container = {{"name", "psflow"}, {"image", "psflow/ps:1"}};
  json pod = {{"metadata", {{"name", "j-ps-" + std::to_string(index)}, {"uid", uid}}},
              {"spec", {{"nodeName", "node-1"}, {"containers", json::array({container})}}},
              {"status", {{"phase", phase}}}};
  if (!volume.empty()) {
    json v = json::parse(volume);
    v["name"] = "psflow-checkpoints";
    pod["spec"]["volumes"] = json::array({v});
    pod["spec"]["containers"][0]["volumeMounts"] =
        json::array({{{"name", "psflow-checkpoints"}, {"mountPath", "/ckpt"}}});
    pod["spec"]["containers"][0]["args"] = json::array({"--checkpoint_dir=/ckpt"});
  }
  json status = {{"name", "psflow"}, {"restartCount", restarts}};
  if (phase == "Running") status["state"] = {{"running", {{"startedAt", "2027-01-15T08:00:00Z"}}}};
  if (phase == "Pending") status["state"] = {{"waiting", {{"reason", "ContainerCreating"}}}};
  if (restarts > 0) {
    status["lastState"] = {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}}}};
  }
  pod["status"]["containerStatuses"] = json::array({status});
  return pod;
}

class PsRestartsTest : public ::testing::Test {
 protected:
  // One pass over `pods` (by index) of a job with `replicas` ps tasks.
  std::vector<PsRestart> Track(const std::vector<json>& pods, int replicas = 2) {
    std::map<int, const json*> by_index;
    for (const json& pod : pods) {
      const std::string name = pod["metadata"]["name"];
      by_index[name.back() - '0'] = &pod;
    }
    return TrackPsRestarts(by_index, replicas, indexes_, observed_);
  }

  std::map<int, IndexStatus> indexes_;
  std::map<int, ObservedPod> observed_;
};

TEST_F(PsRestartsTest, AStartedPodIsRecordedAPendingOneIsNot) {
  EXPECT_TRUE(Track({PsPod(0, "u0", "Running", 0), PsPod(1, "u1", "Pending", 0)}).empty());
  EXPECT_EQ(observed_, (std::map<int, ObservedPod>{{0, {"u0", 0}}}));
}

TEST_F(PsRestartsTest, AnInPlaceRestartWithoutCheckpointLosesTheProgressAndIsToldOnce) {
  observed_ = {{0, {"u0", 0}}};
  const std::vector<PsRestart> restarts = Track({PsPod(0, "u0", "Running", 1)});
  ASSERT_EQ(restarts.size(), 1u);
  const PsRestart& r = restarts[0];
  EXPECT_EQ(r.index, 0);
  EXPECT_EQ(r.pod, "j-ps-0");
  EXPECT_FALSE(r.replaced);
  EXPECT_TRUE(r.ProgressLost());
  EXPECT_STREQ(r.LossReason(), "NoCheckpoint");
  EXPECT_EQ(r.Describe(),
            "PS 0 (pod j-ps-0) was restarted in place after exit code 137 (OOMKilled) and lost "
            "its training progress: it keeps no checkpoint (no --checkpoint_dir; "
            "spec.replicaSpecs.PS.checkpoint gives it one). The chief re-initialises its "
            "variables from the chief's copy and the global step resumes from the workers' last; "
            "the updates the chief had not pulled and the optimizer's slots are lost");
  EXPECT_EQ(observed_, (std::map<int, ObservedPod>{{0, {"u0", 1}}}));
  EXPECT_TRUE(Track({PsPod(0, "u0", "Running", 1)}).empty());  // the next pass: nothing new
}

TEST_F(PsRestartsTest, AnEmptyDirKeepsTheProgressAcrossAnInPlaceRestart) {
  observed_ = {{0, {"u0", 2}}};
  const std::vector<PsRestart> restarts = Track({PsPod(0, "u0", "Running", 3, kEmptyDir)});
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_FALSE(restarts[0].ProgressLost());
  EXPECT_EQ(restarts[0].Describe(),
            "PS 0 (pod j-ps-0) was restarted in place after exit code 137 (OOMKilled); it "
            "restores its newest checkpoint (--checkpoint_dir=/ckpt on emptyDir volume "
            "psflow-checkpoints): the steps since that checkpoint are trained again (had it "
            "written none yet, the chief "
            "re-initialises it and the ps and chief logs say the progress was lost)");
}

TEST_F(PsRestartsTest, AnEmptyDirGoesWithAReplacedPod) {
  observed_ = {{0, {"u0", 3}}};
  // The new pod is not reported before its ps starts; then once.
  EXPECT_TRUE(Track({PsPod(0, "u1", "Pending", 0, kEmptyDir)}).empty());
  EXPECT_EQ(observed_, (std::map<int, ObservedPod>{{0, {"u0", 3}}}));
  const std::vector<PsRestart> restarts = Track({PsPod(0, "u1", "Running", 0, kEmptyDir)});
  ASSERT_EQ(restarts.size(), 1u);
  const PsRestart& r = restarts[0];
  EXPECT_TRUE(r.replaced);
  EXPECT_TRUE(r.ProgressLost());
  EXPECT_STREQ(r.LossReason(), "CheckpointLostWithPod");
  EXPECT_EQ(r.Describe(),
            "PS 0 (pod j-ps-0) runs in a new pod (the one before was deleted or replaced) and "
            "lost its training progress: its checkpoints (--checkpoint_dir=/ckpt on emptyDir "
            "volume psflow-checkpoints) went with the old pod (a persistentVolumeClaim checkpoint "
            "outlives it). The chief re-initialises its variables from the chief's copy and the "
            "global step resumes from the workers' last; the updates the chief had not pulled "
            "and the optimizer's slots are lost");
  EXPECT_EQ(observed_, (std::map<int, ObservedPod>{{0, {"u1", 0}}}));
  EXPECT_TRUE(Track({PsPod(0, "u1", "Running", 0, kEmptyDir)}).empty());
}

TEST_F(PsRestartsTest, AClaimOutlivesAReplacedPod) {
  observed_ = {{1, {"u0", 0}}};
  const std::vector<PsRestart> restarts = Track({PsPod(1, "u1", "Running", 0, kClaim)});
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].index, 1);
  EXPECT_FALSE(restarts[0].ProgressLost());
  EXPECT_EQ(restarts[0].Describe(),
            "PS 1 (pod j-ps-1) runs in a new pod (the one before was deleted or replaced); it "
            "restores its newest checkpoint (--checkpoint_dir=/ckpt on persistentVolumeClaim ckpt "
            "(volume psflow-checkpoints)): the steps since that checkpoint are trained again (had "
            "it written none yet, the chief "
            "re-initialises it and the ps and chief logs say the progress was lost)");
}

TEST_F(PsRestartsTest, APodBeingDeletedOrMissingChangesNothing) {
  observed_ = {{0, {"u0", 0}}, {1, {"u1", 0}}};
  json going = PsPod(0, "u0", "Running", 1);
  going["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z";
  EXPECT_TRUE(Track({going}).empty());
  EXPECT_EQ(observed_, (std::map<int, ObservedPod>{{0, {"u0", 0}}, {1, {"u1", 0}}}));
}

TEST_F(PsRestartsTest, ASidecarsRestartsAreNotThePs) {
  observed_ = {{0, {"u0", 0}}};
  json pod = PsPod(0, "u0", "Running", 0);
  pod["spec"]["containers"].push_back({{"name", "proxy"}});
  pod["status"]["containerStatuses"].push_back({{"name", "proxy"}, {"restartCount", 4}});
  EXPECT_TRUE(Track({pod}).empty());
}

TEST_F(PsRestartsTest, AFirstSightCountsOnlyRestartsTheStatusDidNotCountYet) {
  // Restarted before any pass saw it running: told.
  EXPECT_EQ(Track({PsPod(0, "u0", "Running", 1)}).size(), 1u);
  // A job an operator without observedPods ran: its index status counts these restarts already.
  observed_.clear();
  indexes_[1].restarts = 4;
  indexes_[1].replaced_restarts = 2;
  EXPECT_TRUE(Track({PsPod(1, "u1", "Running", 2)}).empty());
  EXPECT_EQ(observed_, (std::map<int, ObservedPod>{{1, {"u1", 2}}}));
}

TEST_F(PsRestartsTest, IndexesScaledAwayAreForgotten) {
  observed_ = {{0, {"u0", 0}}, {3, {"u3", 1}}};
  EXPECT_TRUE(Track({}, 2).empty());
  EXPECT_EQ(observed_, (std::map<int, ObservedPod>{{0, {"u0", 0}}}));
}

}  // namespace
}  // namespace psflow::controller
