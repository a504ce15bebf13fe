// What BuildPod adds for spec.sharedMemory: the job's socket directory of the node on every pod,
// the socket on the ps, and the init container that lets the ps's user make it; and the check of
// the operator's --shared_memory_dir.
#include "operator/controller/shared_memory_channel.h"

#include <gtest/gtest.h>

#include <string>

#include "operator/controller/replica_objects.h"
#include "operator/controller/test_jobs.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

// The test job (uid u-1) with spec.sharedMemory `shared_memory` (JSON), its ps container `ps`.
TestJob SharedMemoryJob(const std::string& shared_memory, json ps) {
  TestJob job = MakeTestJob({{"spec", {{"containers", json::array({std::move(ps)})}}}});
  job.object["spec"]["sharedMemory"] = json::parse(shared_memory);
  auto parsed = api::ParseTrainingJob(job.object.dump(), "test");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  job.parsed = parsed.value_or(api::TrainingJob());
  return job;
}

// The env value `name` of a container, "" when it has none.
std::string Env(const json& container, const std::string& name) {
  for (const json& e : container.value("env", json::array())) {
    if (e.value("name", "") == name) return e.value("value", "");
  }
  return "";
}

TEST(SharedMemoryChannel, EveryPodMountsTheNodesDirectoryAndThePsListensThere) {
  const TestJob job =
      SharedMemoryJob(R"({"enabled": true})",
                      {{"name", "psflow"}, {"image", "psflow/ps:1"}, {"imagePullPolicy", "Never"}});
  const json volume = json::parse(R"({"name": "psflow-bulk-sockets",
      "hostPath": {"path": "/var/run/psflow-x/u-1", "type": "DirectoryOrCreate"}})");
  const json mount =
      json::parse(R"({"name": "psflow-bulk-sockets", "mountPath": "/run/psflow-bulk"})");

  const json ps =
      BuildPod(job.object, job.parsed, api::ReplicaType::kPS, 0, "/var/run/psflow-x")["spec"];
  EXPECT_EQ(ps["volumes"][0], volume);
  EXPECT_EQ(ps["containers"][0]["volumeMounts"][0], mount);
  EXPECT_EQ(Env(ps["containers"][0], "PSFLOW_BULK_SOCKET"), "/run/psflow-bulk/ps-0.sock");
  ASSERT_EQ(ps["initContainers"].size(), 1u);
  EXPECT_EQ(ps["initContainers"][0], json::parse(R"({"name": "psflow-bulk-sockets",
      "image": "psflow/ps:1", "imagePullPolicy": "Never",
      "command": ["chmod", "1777", "/run/psflow-bulk"],
      "volumeMounts": [{"name": "psflow-bulk-sockets", "mountPath": "/run/psflow-bulk"}],
      "securityContext": {"runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": false,
                          "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}}})"));
  // The pod's own user stays psflow's: only the init container runs as root.
  EXPECT_EQ(ps["securityContext"]["runAsUser"], 65532);
  EXPECT_EQ(ps["securityContext"]["runAsNonRoot"], true);

  const json worker =
      BuildPod(job.object, job.parsed, api::ReplicaType::kWorker, 0, "/var/run/psflow-x")["spec"];
  EXPECT_EQ(worker["volumes"][0], volume);
  EXPECT_EQ(worker["containers"][0]["volumeMounts"][0], mount);
  EXPECT_EQ(Env(worker["containers"][0], "PSFLOW_BULK_SOCKET"), "");
  EXPECT_FALSE(worker.contains("initContainers"));
}

TEST(SharedMemoryChannel, OffByDefaultAndWhenDisabled) {
  for (const char* spec : {R"({})", R"({"enabled": false})"}) {
    const TestJob job = SharedMemoryJob(spec, {{"name", "psflow"}, {"image", "p"}});
    for (api::ReplicaType type : {api::ReplicaType::kPS, api::ReplicaType::kWorker}) {
      const json pod = BuildPod(job.object, job.parsed, type, 0)["spec"];
      EXPECT_EQ(pod["volumes"], json::parse(R"([{"name": "psflow-tmp", "emptyDir": {}}])")) << spec;
      EXPECT_FALSE(pod.contains("initContainers")) << spec;
      EXPECT_EQ(Env(pod["containers"][0], "PSFLOW_BULK_SOCKET"), "") << spec;
    }
  }
}

TEST(SharedMemoryChannel, TheOperatorsSocketReplacesTheTemplatesAndItsInitComesFirst) {
  TestJob job = SharedMemoryJob(
      R"({"enabled": true})",
      {{"name", "psflow"},
       {"image", "p"},
       {"env", json::array({{{"name", "PSFLOW_BULK_SOCKET"}, {"value", "@mine"}}})}});
  job.object["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["initContainers"] =
      json::array({{{"name", "fetch"}, {"image", "f"}}});
  const json ps = BuildPod(job.object, job.parsed, api::ReplicaType::kPS, 2)["spec"];
  EXPECT_EQ(Env(ps["containers"][0], "PSFLOW_BULK_SOCKET"), "/run/psflow-bulk/ps-2.sock");
  int sockets = 0;  // one PSFLOW_BULK_SOCKET, the operator's
  for (const json& e : ps["containers"][0]["env"]) sockets += e["name"] == "PSFLOW_BULK_SOCKET";
  EXPECT_EQ(sockets, 1);
  ASSERT_EQ(ps["initContainers"].size(), 2u);
  EXPECT_EQ(ps["initContainers"][0]["name"], "psflow-bulk-sockets");
  EXPECT_EQ(ps["initContainers"][1]["name"], "fetch");
  EXPECT_EQ(ps["volumes"][0]["hostPath"]["path"], "/run/psflow/u-1");  // the default directory
}

// --shared_memory_dir: the operator's, checked when it starts.
TEST(SharedMemoryChannel, TheNodeDirectoryIsAnAbsolutePathWithoutDotParts) {
  for (const char* good : {"/run/psflow", "/var/lib/psflow/", "/a"}) {
    EXPECT_TRUE(CheckSharedMemoryDir(good).ok()) << good;
  }
  for (const char* bad : {"", "/", "run/psflow", "/run/../etc", "/run/./psflow", "/.."}) {
    const absl::Status s = CheckSharedMemoryDir(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message(), std::string("the shared-memory directory must be an absolute path "
                                       "below / without . or .. parts, not \"") +
                               bad + "\"");
  }
}

}  // namespace
}  // namespace psflow::controller
