// A ps that dies in a real pod (tests/node: kubelet, containerd, runc): its container is killed
// with SIGKILL mid-training, as the kernel's OOM killer or a crash would end it. The kubelet, not
// the operator, restarts it (restartPolicy OnFailure, the same pod and address); the new container
// restores the newest checkpoint from the checkpoint volume (an emptyDir, which outlives container
// restarts), the workers recover, and the job Succeeds. And elastic workers: `kubectl scale` adds
// a sync worker to a running job and removes it again; suspend and resume stop and restart a
// running job's pods. psflow-operator runs outside the cluster, as in examples_on_node_test.cc.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "operator/kube/resource.h"
#include "tests/node/node_test.h"
#include "tests/operator_process.h"
#include "tests/test_util.h"

namespace psflow::node {
namespace {

using kube::Json;
using testing::Eventually;
using testing::OperatorProcess;

class RecoveryOnNodeTest : public NodeTest {
 protected:
  RecoveryOnNodeTest() : NodeTest("node-recovery") {}

  // The global step of the last "checkpoint at global step N" line in `log`; -1 without one.
  static int64_t LastCheckpoint(const std::string& log) {
    const std::vector<std::string> lines = testing::LinesWith(log, "checkpoint at global step ");
    if (lines.empty()) return -1;
    const std::string& line = lines.back();
    int64_t step = -1;
    const size_t at = line.rfind(' ');
    return absl::SimpleAtoi(line.substr(at + 1), &step) ? step : -1;
  }

  // The pid, in this machine's pid namespace, of the running container `container` of `pod`.
  int ContainerPid(const std::string& pod, const std::string& container) {
    std::string id, pid;
    if (Crictl({"ps", "-q", "--state", "running", "--name", container, "--label",
                "io.kubernetes.pod.name=" + pod, "--label", "io.kubernetes.pod.namespace=" + ns()},
               &id) != 0) {
      return -1;
    }
    id = std::string(absl::StripAsciiWhitespace(id));
    if (id.empty() || id.find('\n') != std::string::npos) return -1;
    if (Crictl({"inspect", "-o", "go-template", "--template", "{{.info.pid}}", id}, &pid) != 0) {
      return -1;
    }
    int value = -1;
    return absl::SimpleAtoi(absl::StripAsciiWhitespace(pid), &value) ? value : -1;
  }
};

TEST_F(RecoveryOnNodeTest, APsContainerKilledMidTrainingRestoresItsCheckpointAndTheJobSucceeds) {
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  // Long enough to be killed in the middle (25 epochs, about 40 s here), with a checkpoint every
  // 100 steps (the example's is every 60 s).
  Json& ps = job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"][0];
  ps["args"] = Json::array({"--checkpoint_every_steps=100"});
  for (Json& arg :
       job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"]) {
    if (arg == "--train_epochs=5") arg = "--train_epochs=25";
  }
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-recovery", ns(), {"--namespace=" + ns()});
  const std::string pod = "mnist-mlp-ps-0";

  // Some way in: a few checkpoints written.
  int64_t written = -1;
  ASSERT_TRUE(Eventually(
      [&] {
        written = LastCheckpoint(Logs(pod));
        return written >= 500;
      },
      std::chrono::minutes(3)))
      << "no checkpoint at step >= 500\n"
      << Logs(pod) << Diagnosis(op.output());
  const int pid = ContainerPid(pod, "psflow");
  ASSERT_GT(pid, 1) << "the ps container's pid was not found\n" << Diagnosis(op.output());
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  std::cout << "killed the ps container (pid " << pid << ") after its checkpoint at step "
            << written << "\n";

  // The kubelet starts the container again in the same pod; it restores what it wrote.
  Json status;
  ASSERT_TRUE(Eventually(
      [&] {
        const Json got = client_->Get(kube::Pods(), ns(), pod).value_or(Json());
        if (!got.is_object()) return false;
        for (const Json& c : got["status"].value("containerStatuses", Json::array())) {
          if (c.value("name", "") == "psflow" && c.value("restartCount", 0) >= 1 &&
              c["state"].contains("running")) {
            status = c;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(60)))
      << Diagnosis(op.output());
  EXPECT_EQ(status.value("restartCount", 0), 1) << status;
  EXPECT_EQ(status["lastState"]["terminated"].value("exitCode", 0), 128 + SIGKILL) << status;

  const std::string before = Logs(pod, /*previous=*/true);
  const int64_t last_written = LastCheckpoint(before);
  EXPECT_GE(last_written, written) << before;
  std::string restored_line;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<std::string> lines =
            testing::LinesWith(Logs(pod), "from the checkpoint at global step=");
        if (lines.empty()) return false;
        restored_line = lines.front();
        return true;
      },
      std::chrono::seconds(60)))
      << Logs(pod) << Diagnosis(op.output());
  // Nothing it had written is lost: it restored the newest checkpoint the killed container
  // logged, or one it finished writing after that line and before it died.
  EXPECT_GE(testing::Field(restored_line, "step"), static_cast<double>(last_written))
      << restored_line << "\nkilled container's log:\n"
      << before;

  ASSERT_EQ(WaitForEnd("mnist-mlp", std::chrono::minutes(5)), "Succeeded")
      << Diagnosis(op.output());
  const double accuracy = ChiefAccuracy("mnist-mlp");
  EXPECT_GE(accuracy, 0.75) << Logs("mnist-mlp-worker-0");
  std::cout << "restored: " << restored_line << "\nchief test_accuracy=" << accuracy << "\n";
}

class ElasticOnNodeTest : public NodeTest {
 protected:
  ElasticOnNodeTest() : NodeTest("node-elastic") {}

  // `kubectl scale trainingjob/<job> --replicas=N` in this test's namespace.
  void Scale(const std::string& job, int replicas) {
    std::string out;
    ASSERT_EQ(plane_->Kubectl({"scale", "-n", ns(), "trainingjob/" + job,
                               absl::StrCat("--replicas=", replicas)},
                              &out),
              0)
        << out;
  }
};

// Issue 31, elastic workers: a sync job running with one worker is scaled to two with kubectl
// (the scale subresource on Worker); the new pod's TF_CONFIG lists both, and the ps counts it
// from a step boundary on. Scaled back to one, the operator deletes that pod, the kubelet's
// SIGTERM makes the worker finish its step and leave (nothing given up half-way), and worker 0
// trains on, each step waiting for it alone. (The job is then deleted with the namespace: a
// step of this model takes a millisecond or two, so a job long enough for the whole dance
// would take minutes to end.)
TEST_F(ElasticOnNodeTest, KubectlScaleAddsAndRemovesASyncWorkerWhileTheJobRuns) {
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  FitToNode(job, /*steps=*/10000000, {"--sync_replicas", "--log_every_steps=200"});
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-elastic", ns(), {"--namespace=" + ns()});
  const std::string ps = "mnist-mlp-ps-0";

  ASSERT_TRUE(Eventually([&] { return LastGlobalStep(Logs("mnist-mlp-worker-0")) >= 200; },
                         std::chrono::minutes(3)))
      << Logs("mnist-mlp-worker-0") << Diagnosis(op.output());
  Scale("mnist-mlp", 2);

  // The new worker's cluster spec names both workers.
  Json tf_config;
  ASSERT_TRUE(Eventually(
      [&] {
        const Json pod = client_->Get(kube::Pods(), ns(), "mnist-mlp-worker-1").value_or(Json());
        if (!pod.is_object()) return false;
        for (const Json& env : pod["spec"]["containers"][0].value("env", Json::array())) {
          if (env.value("name", "") == "TF_CONFIG") {
            tf_config = Json::parse(env.value("value", "{}"), nullptr, false);
          }
        }
        return tf_config.is_object();
      },
      std::chrono::seconds(60)))
      << Diagnosis(op.output());
  EXPECT_EQ(tf_config["cluster"]["worker"].size(), 2u) << tf_config;
  EXPECT_EQ(tf_config["task"], Json({{"type", "worker"}, {"index", 1}})) << tf_config;

  std::string joined;
  ASSERT_TRUE(Eventually(
      [&] {
        const auto lines = testing::LinesWith(Logs(ps), "worker 1 joined at step ");
        if (lines.empty()) return false;
        joined = lines.front();
        return true;
      },
      std::chrono::minutes(3)))
      << Logs(ps) << Logs("mnist-mlp-worker-1") << Diagnosis(op.output());
  EXPECT_TRUE(absl::StrContains(joined, ": 2 worker(s); a step waits for 2 contribution(s)"))
      << joined;
  // It trains: its own progress lines.
  ASSERT_TRUE(Eventually([&] { return LastGlobalStep(Logs("mnist-mlp-worker-1")) >= 0; },
                         std::chrono::minutes(2)))
      << Logs("mnist-mlp-worker-1") << Diagnosis(op.output());

  Scale("mnist-mlp", 1);
  std::string left;
  ASSERT_TRUE(Eventually(
      [&] {
        const auto lines = testing::LinesWith(Logs(ps), "worker 1 left at step ");
        if (lines.empty()) return false;
        left = lines.front();
        return true;
      },
      std::chrono::minutes(2)))
      << Logs(ps) << Diagnosis(op.output());
  EXPECT_TRUE(absl::StrContains(left, ": 1 worker(s); a step waits for 1 contribution(s)")) << left;

  // Worker 0 trains on alone, each step waiting for it only.
  const size_t at = left.find("left at step ") + 13;
  int64_t left_step = -1;
  ASSERT_TRUE(absl::SimpleAtoi(left.substr(at, left.find(':', at) - at), &left_step)) << left;
  ASSERT_TRUE(
      Eventually([&] { return LastGlobalStep(Logs("mnist-mlp-worker-0")) >= left_step + 400; },
                 std::chrono::minutes(2)))
      << Logs("mnist-mlp-worker-0") << Logs(ps) << Diagnosis(op.output());
  EXPECT_EQ(State("mnist-mlp"), "Running") << Diagnosis(op.output());
  const std::string ps_log = Logs(ps);
  EXPECT_EQ(testing::LinesWith(ps_log, "stayed incomplete").size(), 0u) << ps_log;
  std::cout << "ps: " << joined << "\nps: " << left << "\n";
}

class SuspendOnNodeTest : public NodeTest {
 protected:
  SuspendOnNodeTest() : NodeTest("node-suspend") {}

  void SetSuspend(const std::string& job, bool suspend) {
    std::string out;
    ASSERT_EQ(plane_->Kubectl({"patch", "-n", ns(), "trainingjob/" + job, "--type=merge", "-p",
                               absl::StrCat(R"({"spec":{"runPolicy":{"suspend":)",
                                            suspend ? "true" : "false", "}}}")},
                              &out),
              0)
        << out;
  }
  // The names of the job's pods, deleted ones (still terminating) included.
  std::vector<std::string> PodNames(const std::string& job) {
    std::vector<std::string> names;
    kube::ListOptions options;
    options.label_selector = "psflow.io/job-name=" + job;
    const absl::StatusOr<kube::ObjectList> list = client_->List(kube::Pods(), ns(), options);
    if (!list.ok()) return {"<list failed: " + std::string(list.status().message()) + ">"};
    for (const Json& pod : list->items) names.push_back(pod["metadata"].value("name", ""));
    return names;
  }
};

// Issue 31, suspend as a queue expects it (Kueue and JobSet set spec.runPolicy.suspend): on the
// real node, suspending a running job deletes its pods (the kubelet stops them: the worker's
// SIGTERM path) and counts them neither as failures nor as restarts; resuming makes them again
// and the job trains on, with a Suspended and a Resumed event.
TEST_F(SuspendOnNodeTest, SuspendStopsThePodsUncountedAndResumeRunsThemAgain) {
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  FitToNode(job, /*steps=*/10000000, {"--log_every_steps=200"});
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-suspend", ns(), {"--namespace=" + ns()});

  ASSERT_TRUE(Eventually([&] { return LastGlobalStep(Logs("mnist-mlp-worker-0")) >= 200; },
                         std::chrono::minutes(3)))
      << Logs("mnist-mlp-worker-0") << Diagnosis(op.output());
  SetSuspend("mnist-mlp", true);
  ASSERT_TRUE(
      Eventually([&] { return State("mnist-mlp") == "Suspended" && PodNames("mnist-mlp").empty(); },
                 std::chrono::minutes(2)))
      << Diagnosis(op.output());

  SetSuspend("mnist-mlp", false);
  ASSERT_TRUE(Eventually(
      [&] {
        return State("mnist-mlp") == "Running" && LastGlobalStep(Logs("mnist-mlp-worker-0")) >= 200;
      },
      std::chrono::minutes(3)))
      << Logs("mnist-mlp-worker-0") << Diagnosis(op.output());
  const Json stored = client_->Get(kube::TrainingJobs(), ns(), "mnist-mlp").value_or(Json());
  ASSERT_TRUE(stored.is_object()) << Diagnosis(op.output());
  const Json& status = stored["status"];
  EXPECT_EQ(status.value("restartCount", -1), 0) << status.dump(2);
  for (const auto& [type, replica] : status["replicaStatuses"].items()) {
    EXPECT_EQ(replica.value("failed", 0), 0) << type << ": " << replica.dump(2);
    EXPECT_EQ(replica.value("restarts", 0), 0) << type << ": " << replica.dump(2);
  }
  const std::string events = EventReasons();
  EXPECT_EQ(testing::LinesWith(events, "Suspended").size(), 1u) << events;
  EXPECT_EQ(testing::LinesWith(events, "Resumed").size(), 1u) << events;
  EXPECT_EQ(testing::LinesWith(events, "RestartingReplica").size(), 0u) << events;
}

}  // namespace
}  // namespace psflow::node
