// What the tests on the real node (tests/node/node.sh: kubelet, containerd, kube-scheduler,
// cluster DNS, joined to tests/control_plane) share: a fixture that skips, saying why, where the
// node could not start; the example manifests as kubectl parses them, made to run on this node;
// a job's state and end; what a failure should show; crictl on the node's containerd.
//
// ctest passes the node's folder in PSFLOW_NODE_DIR (tests/node/CMakeLists.txt,
// psflow_node_test) beside the control plane's.
#ifndef PSFLOW_TESTS_NODE_NODE_TEST_H_
#define PSFLOW_TESTS_NODE_NODE_TEST_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/control_plane/control_plane.h"

namespace psflow::node {

// The node's scheduler profile (node.sh): it schedules only pods that name it, and only to this
// node, so the other tests of the run, binding their pods to the control plane's
// psflow-test-node themselves, never race it.
inline constexpr char kSchedulerName[] = "psflow-node";

// The highest "global_step N" of a worker's progress lines in `log`; -1 without one.
int64_t LastGlobalStep(const std::string& log);

class NodeTest : public kubereal::RealApiserverTest {
 protected:
  explicit NodeTest(std::string prefix) : RealApiserverTest(std::move(prefix)) {}
  void SetUp() override;

  // `file` (relative to the source tree) as `kubectl apply --dry-run=client -o json` parses it.
  nlohmann::json Manifest(const std::string& file);
  // `file`'s TrainingJob in this test's namespace, every replica's pods naming the node's
  // scheduler: the one change the tests make to an example before their own.
  nlohmann::json JobOnNode(const std::string& file);
  // The job's status.state; "<gone>" once it cannot be read.
  std::string State(const std::string& job);
  // Waits until the job is Succeeded or Failed, at most `timeout`; its state then.
  std::string WaitForEnd(const std::string& job, std::chrono::seconds timeout);
  // What a failure should show: the job, its pods and events (kubectl's view), and `extra`
  // (the operator's log).
  std::string Diagnosis(const std::string& extra);
  // The reasons of the events in this test's namespace, one line per time each was recorded (an
  // Event's count: the operator counts a repeat on the Event it stored), oldest first
  // ("<kubectl failed: ...>" when it fails).
  std::string EventReasons();
  // `kubectl logs` of a pod's container (the previous one's with previous); "" when it fails.
  std::string Logs(const std::string& pod, bool previous = false);
  // The chief's (worker 0's) test_accuracy from its last line; -1 when it logged none.
  double ChiefAccuracy(const std::string& job);
  // crictl on the node's containerd: its exit code, its output in *output.
  int Crictl(const std::vector<std::string>& args, std::string* output);
  // The data examples' volume, made as docs/operator.md tells a user to: the static hostPath
  // PersistentVolume and the psflow-data claim of deploy/examples/data/psflow-data-hostpath.yaml,
  // over `folder` (made readable by the pods' user), the volume named after this test's
  // namespace; returns once the claim is Bound. TearDown deletes the volume (the claim goes with
  // the namespace). Fails the test (fatally) when it cannot.
  void MakeDataVolume(const std::string& folder);
  // `job` (a TrainingJob of the examples) made to fit this 2-core node as docs/operator.md tells
  // a user of a small cluster to: one replica of each type, each worker asking for half a CPU,
  // training `steps` steps in place of its epochs, with `extra_args` for every worker.
  static void FitToNode(nlohmann::json& job, int steps,
                        const std::vector<std::string>& extra_args = {});
  void TearDown() override;

  const std::string& node_dir() const { return node_dir_; }

 private:
  std::string node_dir_;
  std::string data_volume_;  // the PersistentVolume MakeDataVolume made, if any
};

}  // namespace psflow::node

#endif  // PSFLOW_TESTS_NODE_NODE_TEST_H_
