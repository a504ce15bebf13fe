// What a ps pod's checkpoints outlive, read from the pods BuildPod makes (spec.replicaSpecs.PS.
// checkpoint, the restricted profile's /tmp, a template's own --checkpoint_dir and volumes).
#include "operator/controller/checkpoint_life.h"

#include <gtest/gtest.h>

#include <string>

#include "operator/api/training_job.h"
#include "operator/controller/replica_objects.h"
#include "operator/controller/test_jobs.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

// The ps pod the operator makes for a job whose PS template's main container has `args` (and
// `mounts`, of the template's `volumes`), with spec.replicaSpecs.PS.checkpoint `checkpoint`.
json PsPod(const json& args, const std::string& checkpoint = "", const json& mounts = nullptr,
           const json& volumes = nullptr) {
  json container = {{"name", "psflow"}, {"image", "psflow/ps:1"}, {"args", args}};
  if (!mounts.is_null()) container["volumeMounts"] = mounts;
  json ps_spec = {{"containers", json::array({container})}};
  if (!volumes.is_null()) ps_spec["volumes"] = volumes;
  const TestJob job = MakeTestJob({{"spec", ps_spec}}, checkpoint);
  return BuildPod(job.object, job.parsed, api::ReplicaType::kPS, 0);
}

void ExpectLife(const json& pod, CheckpointLife life, const std::string& where) {
  const PsCheckpoints got = ReadPsCheckpoints(pod);
  EXPECT_EQ(got.life, life) << got.where;
  EXPECT_EQ(got.where, where);
}

TEST(CheckpointLife, WithoutCheckpointTheVariablesLiveOnlyInTheProcess) {
  ExpectLife(PsPod(json::array()), CheckpointLife::kNone, "no --checkpoint_dir");
}

TEST(CheckpointLife, TheSpecsEmptyDirOutlivesTheContainerOnly) {
  ExpectLife(PsPod(json::array(), R"({"volume": "emptyDir", "sizeLimit": "1Gi"})"),
             CheckpointLife::kPod,
             "--checkpoint_dir=/var/lib/psflow/checkpoints on emptyDir volume psflow-checkpoints");
}

TEST(CheckpointLife, TheSpecsClaimOutlivesThePodAndWinsOverTheTemplatesFlag) {
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/ckpt"}),
                   R"({"volume": "persistentVolumeClaim", "claimName": "ps-ckpt"})"),
             CheckpointLife::kBeyondPod,
             "--checkpoint_dir=/var/lib/psflow/checkpoints on persistentVolumeClaim ps-ckpt "
             "(volume psflow-checkpoints)");
}

TEST(CheckpointLife, ATemplatesFlagUnderTmpIsOnTheRestrictedProfilesEmptyDir) {
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/tmp/ckpt"})), CheckpointLife::kPod,
             "--checkpoint_dir=/tmp/ckpt on emptyDir volume psflow-tmp");
}

TEST(CheckpointLife, ATemplatesFlagOnTheReadOnlyRootFilesystemKeepsNothing) {
  // The value as the next argument, as absl's flags take it too.
  ExpectLife(PsPod(json::array({"--checkpoint_dir", "/ckpt"})), CheckpointLife::kNone,
             "--checkpoint_dir=/ckpt on the container's own filesystem");
  ExpectLife(PsPod(json::array({"-checkpoint_dir=ckpt"})), CheckpointLife::kNone,
             "--checkpoint_dir=ckpt on the container's own filesystem");
}

TEST(CheckpointLife, TheLastFlagWinsAndAnEmptyOneTurnsCheckpointsOff) {
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/ckpt", "--checkpoint_dir=/tmp/c"})),
             CheckpointLife::kPod, "--checkpoint_dir=/tmp/c on emptyDir volume psflow-tmp");
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/tmp/c", "--checkpoint_dir="})),
             CheckpointLife::kNone, "no --checkpoint_dir");
  // Other flags that start alike are not it.
  ExpectLife(PsPod(json::array({"--checkpoint_dirs=/tmp/c", "--checkpoint_every_s=5"})),
             CheckpointLife::kNone, "no --checkpoint_dir");
}

TEST(CheckpointLife, TheDeepestMountAboveTheFolderDecides) {
  const json volumes =
      json::parse(R"([{"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
                                       {"name": "scratch", "emptyDir": {}},
                                       {"name": "shared", "nfs": {"server": "n", "path": "/x"}},
                                       {"name": "config", "configMap": {"name": "c"}}])");
  const json mounts = json::parse(R"([{"name": "data", "mountPath": "/data/"},
                                      {"name": "scratch", "mountPath": "/data/scratch"},
                                      {"name": "shared", "mountPath": "/shared"},
                                      {"name": "config", "mountPath": "/config"},
                                      {"name": "data", "mountPath": "/ro", "readOnly": true}])");
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/data/run1"}), "", mounts, volumes),
             CheckpointLife::kBeyondPod,
             "--checkpoint_dir=/data/run1 on persistentVolumeClaim d (volume data)");
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/data/scratch/run1"}), "", mounts, volumes),
             CheckpointLife::kPod,
             "--checkpoint_dir=/data/scratch/run1 on emptyDir volume scratch");
  // A sibling whose name starts alike is not under the mount.
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/data/scratchpad"}), "", mounts, volumes),
             CheckpointLife::kBeyondPod,
             "--checkpoint_dir=/data/scratchpad on persistentVolumeClaim d (volume data)");
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/shared"}), "", mounts, volumes),
             CheckpointLife::kBeyondPod, "--checkpoint_dir=/shared on volume shared");
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/config/c"}), "", mounts, volumes),
             CheckpointLife::kNone,
             "--checkpoint_dir=/config/c on read-only configMap volume config");
  ExpectLife(PsPod(json::array({"--checkpoint_dir=/ro/c"}), "", mounts, volumes),
             CheckpointLife::kNone, "--checkpoint_dir=/ro/c on read-only mount data");
}

TEST(CheckpointLife, OnlyTheMainContainersFlagCounts) {
  const json pod = json::parse(R"({"spec": {"containers": [
      {"name": "sidecar", "args": ["--checkpoint_dir=/tmp/c"],
       "volumeMounts": [{"name": "t", "mountPath": "/tmp"}]},
      {"name": "psflow", "command": ["psflow-ps", "--checkpoint_dir=/tmp/p"],
       "volumeMounts": [{"name": "t", "mountPath": "/tmp"}]}],
      "volumes": [{"name": "t", "emptyDir": {}}]}})");
  ExpectLife(pod, CheckpointLife::kPod, "--checkpoint_dir=/tmp/p on emptyDir volume t");
}

TEST(CheckpointLife, MalformedPodsReadAsNoCheckpoint) {
  for (const char* text :
       {R"(null)", R"({"spec": 3})", R"({"spec": {"containers": {}}})",
        R"({"spec": {"containers": [7, {"name": "psflow", "args": [1, "--checkpoint_dir"]}]}})",
        R"({"spec": {"containers": [{"args": ["--checkpoint_dir=/x"],
                                     "volumeMounts": [{"name": "v", "mountPath": 5},
                                                      {"name": "w", "mountPath": "/x"}]}],
                     "volumes": 3}})"}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(ReadPsCheckpoints(json::parse(text)).life, CheckpointLife::kNone);
  }
}

}  // namespace
}  // namespace psflow::controller
