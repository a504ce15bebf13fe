// A ps that dies in a real pod (tests/node: kubelet, containerd, runc): its container is killed
// with SIGKILL mid-training, as the kernel's OOM killer or a crash would end it. The kubelet, not
// the operator, restarts it (restartPolicy OnFailure, the same pod and address); the new container
// restores the newest checkpoint from the checkpoint volume (an emptyDir, which outlives container
// restarts), the workers recover, and the job Succeeds. psflow-operator runs outside the cluster,
// as in examples_on_node_test.cc.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace psflow::node
