#include "tests/node/node_test.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/read_file.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/operator_process.h"
#include "tests/test_util.h"

namespace psflow::node {

using kube::Json;

void NodeTest::SetUp() {
  const char* node_dir = std::getenv("PSFLOW_NODE_DIR");
  if (node_dir == nullptr) GTEST_SKIP() << "no node: run through ctest (the kube_node fixture)";
  node_dir_ = node_dir;
  if (std::filesystem::exists(node_dir_ + "/skip")) {
    GTEST_SKIP() << ReadFile(node_dir_ + "/skip").value_or("no node (its skip file unreadable)");
  }
  RealApiserverTest::SetUp();
}

Json NodeTest::Manifest(const std::string& file) {
  std::string out;
  const int code = plane_->Kubectl(
      {"apply", "--dry-run=client", "-o", "json", "-f", testing::SourceDir() + "/" + file}, &out);
  EXPECT_EQ(code, 0) << out;
  const size_t start = out.find('{');  // after any warning kubectl prints
  return Json::parse(start == std::string::npos ? "{}" : out.substr(start), nullptr,
                     /*allow_exceptions=*/false);
}

Json NodeTest::JobOnNode(const std::string& file) {
  Json job = Manifest(file);
  if (!job.is_object() || !job.contains("spec")) return job;
  for (auto& [type, replica] : job["spec"]["replicaSpecs"].items()) {
    replica["template"]["spec"]["schedulerName"] = kSchedulerName;
  }
  job["metadata"]["namespace"] = ns();
  return job;
}

std::string NodeTest::State(const std::string& job) {
  const Json got = client_->Get(kube::TrainingJobs(), ns(), job).value_or(Json());
  return got.is_object() ? kube::StringAt(got, "status", "state") : "<gone>";
}

std::string NodeTest::WaitForEnd(const std::string& job, std::chrono::seconds timeout) {
  std::string state;
  testing::Eventually(
      [&] {
        state = State(job);
        return state == "Succeeded" || state == "Failed";
      },
      timeout);
  return state;
}

std::string NodeTest::Diagnosis(const std::string& extra) {
  std::string job, pods;
  plane_->Kubectl({"get", "trainingjob", "-n", ns(), "-o", "yaml"}, &job);
  plane_->Kubectl({"get", "pods,events", "-n", ns(), "-o", "wide"}, &pods);
  return absl::StrCat("job:\n", job, "\npods and events:\n", pods, "\n", extra);
}

std::string NodeTest::Logs(const std::string& pod, bool previous) {
  std::string log;
  std::vector<std::string> args = {"logs", "-n", ns(), pod};
  if (previous) args.push_back("--previous");
  return plane_->Kubectl(args, &log) == 0 ? log : "";
}

// The highest "global_step N" of the progress lines in `log`; -1 without one.
int64_t LastGlobalStep(const std::string& log) {
  int64_t last = -1;
  for (const std::string& line : testing::LinesWith(log, " global_step ")) {
    const size_t at = line.find(" global_step ") + 13;
    int64_t step = -1;
    const size_t end = line.find(' ', at);
    if (absl::SimpleAtoi(line.substr(at, end - at), &step)) last = std::max(last, step);
  }
  return last;
}

std::string NodeTest::EventReasons() {
  std::string out;
  if (plane_->Kubectl({"get", "events", "-n", ns(), "--sort-by=.metadata.creationTimestamp", "-o",
                       "jsonpath={range .items[*]}{.reason} {.count}{\"\\n\"}{end}"},
                      &out) != 0) {
    return "<kubectl failed: " + out + ">";
  }
  std::string reasons;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    const size_t space = line.rfind(' ');
    int count = 1;  // an Event without a count (a kubelet's new-style one) was recorded once
    if (space != absl::string_view::npos && !absl::SimpleAtoi(line.substr(space + 1), &count)) {
      count = 1;
    }
    for (int n = 0; n < std::max(count, 1); ++n) {
      absl::StrAppend(&reasons, line.substr(0, space), "\n");
    }
  }
  return reasons;
}

double NodeTest::ChiefAccuracy(const std::string& job) {
  const std::vector<std::string> done =
      testing::LinesWith(Logs(job + "-worker-0"), "test_accuracy=");
  return done.empty() ? -1 : testing::Field(done.back(), "test_accuracy");
}

void NodeTest::MakeDataVolume(const std::string& folder) {
  std::filesystem::permissions(folder, std::filesystem::perms(0755));  // the pods run as 65532
  Json data = Manifest("deploy/examples/data/psflow-data-hostpath.yaml");
  ASSERT_TRUE(data.contains("items")) << data;
  data_volume_ = absl::StrCat("psflow-data-", ns());  // cluster-wide: named after the namespace
  for (Json& item : data["items"]) {
    if (item["kind"] == "PersistentVolume") {
      item["metadata"]["name"] = data_volume_;
      item["spec"]["hostPath"]["path"] = folder;
    } else {
      item["metadata"]["namespace"] = ns();
      item["spec"]["volumeName"] = data_volume_;
    }
  }
  const std::string file = folder + ".json";
  std::ofstream(file) << data.dump();
  std::string out;
  ASSERT_EQ(plane_->Kubectl({"apply", "-f", file}, &out), 0) << out;
  std::filesystem::remove(file);
  ASSERT_TRUE(testing::Eventually(
      [&] {
        std::string phase;
        plane_->Kubectl({"get", "pvc", "psflow-data", "-n", ns(), "-o", "jsonpath={.status.phase}"},
                        &phase);
        return phase == "Bound";
      },
      std::chrono::seconds(30)))
      << "the claim was not bound to the volume";
}

void NodeTest::FitToNode(Json& job, int steps, const std::vector<std::string>& extra_args) {
  for (auto& [type, replica] : job["spec"]["replicaSpecs"].items()) {
    replica["replicas"] = 1;
    if (type != "Worker") continue;
    Json& container = replica["template"]["spec"]["containers"][0];
    if (!container["resources"].is_object()) container["resources"] = Json::object();
    Json requests = container["resources"].value("requests", Json::object());
    requests["cpu"] = "500m";
    container["resources"]["requests"] = requests;
    Json args = Json::array();
    for (const Json& arg : container.value("args", Json::array())) {
      if (!arg.get<std::string>().starts_with("--train_epochs=")) args.push_back(arg);
    }
    args.push_back(absl::StrCat("--train_steps=", steps));
    for (const std::string& arg : extra_args) args.push_back(arg);
    container["args"] = args;
  }
}

void NodeTest::TearDown() {
  // A pod that carried an earlier pod's status (the operator's StaleStatus events; docs/
  // operator.md, Lifecycle) is handled, not a failure; the run's log says that it happened.
  std::string stale;
  if (plane_->Kubectl({"get", "events", "-n", ns(), "--field-selector", "reason=StaleStatus", "-o",
                       "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"},
                      &stale) == 0 &&
      !stale.empty()) {
    std::cout << "StaleStatus events in " << ns() << ":\n" << stale;
  }
  if (!data_volume_.empty()) {
    std::string out;
    plane_->Kubectl({"delete", "pv", data_volume_, "--wait=false"}, &out);
  }
  RealApiserverTest::TearDown();
}

int NodeTest::Crictl(const std::vector<std::string>& args, std::string* output) {
  std::vector<std::string> argv = {node_dir_ + "/../kube-bin/crictl", "--runtime-endpoint",
                                   "unix://" + node_dir_ + "/containerd.sock", "--timeout", "20s"};
  argv.insert(argv.end(), args.begin(), args.end());
  const testing::CommandResult result =
      testing::RunCommand(argv, testing::Environment({}), std::chrono::seconds(60));
  if (output != nullptr) *output = result.output;
  return result.timed_out ? -1 : result.status.code;
}

}  // namespace psflow::node
