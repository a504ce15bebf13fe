// The examples of deploy/examples on a real node (tests/node/node.sh: kubelet, containerd,
// kube-scheduler, cluster DNS, joined to tests/control_plane): psflow-operator, the binary, runs
// outside the cluster as in operator_e2e_test.cc; the ps and workers run for real in the images
// psflow/ps:0.1.0 and psflow/worker:0.1.0 that scripts/images.sh --prebuilt built from build/bin
// (the psflow_images fixture). Nothing plays the kubelet here.
//
// mnist-mlp.yaml runs as it is, with its mutual TLS; the one change to every example: its pods
// name the node's scheduler (NodeTest::JobOnNode). The larger ones are made to fit this 2-core
// node as docs/operator.md tells a user of a small cluster to (NodeTest::FitToNode: one replica of
// each type, half a CPU per worker, a few steps), the data examples reading the volume the docs
// describe.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/read_file.h"
#include "core/safetensors.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/node/node_test.h"
#include "tests/operator_process.h"
#include "tests/test_util.h"

#ifndef PSFLOW_PTB_CORPUS_DIR
#error "PSFLOW_PTB_CORPUS_DIR: the ptb_corpus fixture's folder (tests/CMakeLists.txt)"
#endif

namespace psflow::node {
namespace {

using kube::Json;
using testing::Eventually;
using testing::OperatorProcess;

constexpr auto kJobTimeout = std::chrono::minutes(5);

class ExamplesOnNodeTest : public NodeTest {
 protected:
  ExamplesOnNodeTest() : NodeTest("node") {}
};

// The examples' own data: none for MNIST (the worker image carries Fashion-MNIST); the PTB
// corpus scripts/make_ptb_corpus.py builds (the ptb_corpus fixture) on the data volume.
class PtbExampleOnNodeTest : public ExamplesOnNodeTest,
                             public ::testing::WithParamInterface<std::string> {};

TEST_F(ExamplesOnNodeTest, MnistMlpExampleSucceedsInContainers) {
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node", ns(), {"--namespace=" + ns()});

  ASSERT_EQ(WaitForEnd("mnist-mlp", kJobTimeout), "Succeeded") << Diagnosis(op.output());

  // The chief (worker 0) evaluates the model it trained through the ps: its last line, read
  // through the API server's pod log endpoint (the kubelet's).
  std::string log;
  ASSERT_EQ(plane_->Kubectl({"logs", "-n", ns(), "mnist-mlp-worker-0"}, &log), 0) << log;
  const std::vector<std::string> done = testing::LinesWith(log, "test_accuracy=");
  ASSERT_EQ(done.size(), 1u) << log;
  EXPECT_GE(testing::Field(done[0], "test_accuracy"), 0.75) << done[0];
  std::cout << "chief: " << done[0] << "\n";
}

// spec.sharedMemory on the real node (issue 27): the ps and both workers share the node, so the
// workers take the ps's socket in the job's directory of the node and move tensor bytes through
// shared memory. The operator's --shared_memory_dir is the test's own (not the default
// /run/psflow); the job's directory under it, <dir>/<job uid>, is made by the kubelet and opened
// (mode 1777) by the ps pod's init container; the ps removes its socket when it stops.
TEST_F(ExamplesOnNodeTest, MnistMlpWithSharedMemoryTrainsThroughTheNodesSocket) {
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  const std::filesystem::path base = "/run/psflow-test-" + ns();
  std::filesystem::remove_all(base);
  job["spec"]["sharedMemory"] = {{"enabled", true}};
  // Both workers train to their end before the job succeeds: a worker the loaded node started
  // late would otherwise be deleted (cleanPodPolicy Running) before its first exchange, when
  // the chief alone finished (seen once in CI: worker 1's log held only its start-up lines).
  job["spec"]["successPolicy"] = "AllWorkers";
  const absl::StatusOr<Json> made = client_->Create(kube::TrainingJobs(), ns(), job);
  ASSERT_TRUE(made.ok()) << made.status();
  const std::filesystem::path dir = base / kube::Uid(*made);
  OperatorProcess op(plane_->kubeconfig(), "op-node-shm", ns(),
                     {"--namespace=" + ns(), "--shared_memory_dir=" + base.string()});

  ASSERT_EQ(WaitForEnd("mnist-mlp", kJobTimeout), "Succeeded") << Diagnosis(op.output());
  for (const char* worker : {"mnist-mlp-worker-0", "mnist-mlp-worker-1"}) {
    const std::string log = Logs(worker);
    EXPECT_EQ(testing::LinesWith(log, "through shared memory").size(), 1u) << worker << ":\n"
                                                                           << log;
  }
  std::error_code error;
  const auto status = std::filesystem::status(dir, error);
  ASSERT_FALSE(error) << dir << ": " << error.message();
  EXPECT_EQ(status.permissions() & std::filesystem::perms::mask,
            std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
  // The ps pod stops (SIGTERM) once the job succeeds, and takes its socket with it.
  const auto emptied = [&] { return std::filesystem::is_empty(dir, error) && !error; };
  EXPECT_TRUE(Eventually(emptied, std::chrono::seconds(60)))
      << "left in " << dir << "; " << Diagnosis(op.output());
  std::filesystem::remove_all(base, error);
}

// Issue 29: a worker asking for more CPU than the node has stayed Pending and the job said
// nothing. Now the real scheduler's message reaches the job's Unschedulable condition and a
// Warning event, and runPolicy.schedulingTimeoutSeconds fails the job with it.
TEST_F(ExamplesOnNodeTest, AnUnschedulableWorkerIsSaidAndFailsTheJobAfterTheSchedulingTimeout) {
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
      {"requests", {{"cpu", "64"}}}};
  job["spec"]["runPolicy"]["schedulingTimeoutSeconds"] = 20;
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-big", ns(), {"--namespace=" + ns()});

  // The condition, with the scheduler's own words.
  std::string said;
  const bool condition = Eventually(
      [&] {
        const Json got = client_->Get(kube::TrainingJobs(), ns(), "mnist-mlp").value_or(Json());
        if (!got.is_object() || !got.contains("status")) return false;
        for (const Json& c : got["status"].value("conditions", Json::array())) {
          if (c.value("type", "") == "Unschedulable" && c.value("status", "") == "True") {
            said = c.value("message", "");
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(30));
  ASSERT_TRUE(condition) << Diagnosis(op.output());
  EXPECT_NE(said.find("(pod mnist-mlp-worker-"), std::string::npos) << said;
  EXPECT_NE(said.find("Insufficient cpu"), std::string::npos) << said;
  // The event follows the status write that holds the condition: it may come a moment later.
  const bool warned = Eventually([&] {
    const auto events = client_->List(kube::Events(), ns(), {}).value_or(kube::ObjectList());
    for (const Json& e : events.items) {
      if (e.value("reason", "") == "Unschedulable" && e.value("type", "") == "Warning" &&
          e["involvedObject"].value("kind", "") == "TrainingJob") {
        return true;
      }
    }
    return false;
  });
  EXPECT_TRUE(warned) << Diagnosis(op.output());

  // Then the timeout ends the wait.
  ASSERT_TRUE(Eventually([&] { return State("mnist-mlp") == "Failed"; }, std::chrono::seconds(60)))
      << Diagnosis(op.output());
  const Json got = client_->Get(kube::TrainingJobs(), ns(), "mnist-mlp").value_or(Json());
  bool failed_unschedulable = false;
  for (const Json& c : got["status"].value("conditions", Json::array())) {
    if (c.value("type", "") == "Failed" && c.value("reason", "") == "Unschedulable") {
      failed_unschedulable = true;
      EXPECT_NE(c.value("message", "").find("schedulingTimeoutSeconds=20"), std::string::npos) << c;
      EXPECT_NE(c.value("message", "").find("Insufficient cpu"), std::string::npos) << c;
    }
  }
  EXPECT_TRUE(failed_unschedulable) << got["status"];
}

// Issue 29: while the chief could not be scheduled, the other workers exited after
// --ps_timeout_s ("variables not initialised ... is the chief running?") into CrashLoopBackOff.
// Now a worker waits at the start for as long as it takes (--startup_timeout_s, default 0),
// logging at every --ps_timeout_s, and the job's own limits end the wait.
TEST_F(ExamplesOnNodeTest, AWorkerWaitsForAChiefTheSchedulerCannotPlaceInsteadOfCrashLooping) {
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  Json& worker = job["spec"]["replicaSpecs"]["Worker"];
  worker["replicas"] = 1;
  worker["template"]["spec"]["containers"][0]["args"].push_back("--ps_timeout_s=3");
  Json chief = worker;
  chief["template"]["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "64"}}}};
  job["spec"]["replicaSpecs"]["Chief"] = chief;
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-chief", ns(), {"--namespace=" + ns()});

  // Three of its waits for the chief gone by, and still the same container.
  const std::string pod = "mnist-mlp-worker-0";
  const std::string chief_wait =
      "is the chief running?; still waiting (no limit: --startup_timeout_s=0)";
  std::string log;
  const bool waited = Eventually(
      [&] {
        log = Logs(pod);
        return testing::LinesWith(log, chief_wait).size() >= 3;
      },
      std::chrono::seconds(90));
  ASSERT_TRUE(waited) << log << Diagnosis(op.output());
  // Until the ps first answers, a wait may be for its name (the cluster DNS has no record for a
  // pod just made: seen once in CI) or its port; from its first answer on, every wait is for the
  // chief.
  const size_t first_answer = log.find("is the chief running?");
  const std::string since = log.substr(log.rfind('\n', first_answer) + 1);
  EXPECT_EQ(testing::LinesWith(since, "is the chief running?").size(),
            testing::LinesWith(since, "still waiting").size())
      << log;
  const Json got = client_->Get(kube::Pods(), ns(), pod).value_or(Json());
  ASSERT_TRUE(got.is_object());
  EXPECT_EQ(got["status"]["containerStatuses"][0].value("restartCount", -1), 0) << got["status"];
  EXPECT_TRUE(got["status"]["containerStatuses"][0]["state"].contains("running")) << got["status"];
  EXPECT_EQ(State("mnist-mlp"), "Created") << Diagnosis(op.output());
}

// Issue 29: the CIFAR-10 and PTB examples could not run: nothing said how to provide their
// psflow-data claim. Here the volume is made as docs/operator.md tells a user to (the static
// hostPath PersistentVolume and claim of deploy/examples/data/psflow-data-hostpath.yaml, over a
// folder of CIFAR-10-format files), and deploy/examples/cifar10.yaml, made to fit this 2-core
// node (1 ps, 1 worker of half a CPU, 30 steps), trains from it to Succeeded.
TEST_F(ExamplesOnNodeTest, Cifar10ExampleTrainsFromTheDataVolumeTheDocsDescribe) {
  const std::string folder = absl::StrCat("/tmp/psflow-node-data-", ns());
  std::filesystem::remove_all(folder);
  ASSERT_TRUE(testing::WriteCifarLikeData(folder + "/cifar10", 100, 200, /*seed=*/3));
  ASSERT_NO_FATAL_FAILURE(MakeDataVolume(folder));

  Json job = JobOnNode("deploy/examples/cifar10.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  FitToNode(job, /*steps=*/30);
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-cifar", ns(), {"--namespace=" + ns()});
  ASSERT_EQ(WaitForEnd("cifar10", kJobTimeout), "Succeeded") << Diagnosis(op.output());
  const std::string log = Logs("cifar10-worker-0");
  EXPECT_NE(log.find("shard"), std::string::npos) << log;  // it read the volume's files
  EXPECT_EQ(testing::LinesWith(log, "test_accuracy=").size(), 1u) << log;

  std::string out;
  plane_->Kubectl({"delete", "trainingjob", "cifar10", "-n", ns(), "--wait=true"}, &out);
  std::filesystem::remove_all(folder);
}

// Issue 32: a model of the user's own on a real node. deploy/examples/tabular.yaml's inline
// model (spec.modelFile) reaches the worker through the ConfigMap the operator makes and mounts;
// the worker reads the CSV table scripts/make_tabular_csv.py writes into the data volume, and the
// chief exports the trained model into it: model.safetensors and the model file, on the host.
TEST_F(ExamplesOnNodeTest, TabularExampleTrainsAnInlineModelFromCsvAndExportsIt) {
  const std::string folder = absl::StrCat("/tmp/psflow-node-data-", ns());
  std::filesystem::remove_all(folder);
  const testing::CommandResult made = testing::RunCommand(
      {"python3", testing::SourceDir() + "/scripts/make_tabular_csv.py", folder + "/tabular"},
      testing::Environment({}), std::chrono::seconds(60));
  ASSERT_TRUE(made.status.ok()) << made.output;
  // The pods run as a user of their own (pod_security.h): the export folder is theirs to write.
  std::filesystem::create_directories(folder + "/export");
  std::filesystem::permissions(folder + "/export", std::filesystem::perms::all);
  std::filesystem::permissions(folder + "/tabular", std::filesystem::perms(0755));
  ASSERT_NO_FATAL_FAILURE(MakeDataVolume(folder));

  Json job = JobOnNode("deploy/examples/tabular.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  FitToNode(job, /*steps=*/200);
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-tabular", ns(), {"--namespace=" + ns()});
  ASSERT_EQ(WaitForEnd("tabular", kJobTimeout), "Succeeded") << Diagnosis(op.output());
  const Json map = client_->Get(kube::ConfigMaps(), ns(), "tabular-model").value();
  EXPECT_EQ(map["data"]["model.yaml"], job["spec"]["modelFile"]);
  const std::string log = Logs("tabular-worker-0");
  EXPECT_EQ(testing::LinesWith(log, "loaded 6000 training and 1000 test examples (csv)").size(), 1u)
      << log;
  EXPECT_GE(ChiefAccuracy("tabular"), 0.8) << log;
  EXPECT_EQ(testing::LinesWith(log, "exported the trained model (global step ").size(), 1u) << log;
  const absl::StatusOr<SafetensorsFile> weights =
      ReadSafetensors(folder + "/export/tabular/model.safetensors");
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(weights->tensors.size(), 6u);
  EXPECT_EQ(ReadFile(folder + "/export/tabular/model.yaml").value(),
            job["spec"]["modelFile"].get<std::string>());

  std::string out;
  plane_->Kubectl({"delete", "trainingjob", "tabular", "-n", ns(), "--wait=true"}, &out);
  std::filesystem::remove_all(folder);
}

TEST_F(ExamplesOnNodeTest, MnistCnnExampleFitToTheNodeSucceeds) {
  Json job = JobOnNode("deploy/examples/mnist-cnn.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  FitToNode(job, /*steps=*/20);
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-cnn", ns(), {"--namespace=" + ns()});
  ASSERT_EQ(WaitForEnd("mnist-cnn", kJobTimeout), "Succeeded") << Diagnosis(op.output());
  EXPECT_GE(ChiefAccuracy("mnist-cnn"), 0) << Logs("mnist-cnn-worker-0");
}

// ptb-small, ptb-medium and ptb-large (66 M parameters, 8 GiB asked per worker) from the volume:
// a few steps, a short evaluation (--eval_steps), the chief's perplexities logged.
TEST_P(PtbExampleOnNodeTest, TrainsFromTheDataVolumeFitToTheNode) {
  const std::string name = GetParam();
  const std::string folder = absl::StrCat("/tmp/psflow-node-data-", ns());
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder + "/ptb");
  for (const char* part : {"train", "valid", "test"}) {
    const std::string file = absl::StrCat("ptb.", part, ".txt");
    ASSERT_TRUE(std::filesystem::exists(std::string(PSFLOW_PTB_CORPUS_DIR) + "/" + file))
        << "no corpus: the ptb_corpus fixture (PtbCorpus.BuildsFromWordnet) did not run";
    std::filesystem::copy_file(std::string(PSFLOW_PTB_CORPUS_DIR) + "/" + file,
                               folder + "/ptb/" + file);
  }
  std::filesystem::permissions(folder + "/ptb", std::filesystem::perms(0755));
  ASSERT_NO_FATAL_FAILURE(MakeDataVolume(folder));

  Json job = JobOnNode(absl::StrCat("deploy/examples/", name, ".yaml"));
  ASSERT_TRUE(job.is_object()) << job;
  FitToNode(job, /*steps=*/5, {"--eval_steps=3"});
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-" + name, ns(), {"--namespace=" + ns()});
  ASSERT_EQ(WaitForEnd(name, kJobTimeout), "Succeeded") << Diagnosis(op.output());
  const std::string log = Logs(name + "-worker-0");
  const std::vector<std::string> done = testing::LinesWith(log, "test_perplexity=");
  ASSERT_EQ(done.size(), 1u) << log;
  EXPECT_GT(testing::Field(done[0], "test_perplexity"), 1) << done[0];
  std::cout << name << " chief: " << done[0] << "\n";
  std::filesystem::remove_all(folder);
}

INSTANTIATE_TEST_SUITE_P(Examples, PtbExampleOnNodeTest,
                         ::testing::Values("ptb-small", "ptb-medium", "ptb-large"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
                           return name;
                         });

}  // namespace
}  // namespace psflow::node
