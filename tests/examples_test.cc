// Every example manifest under deploy/examples parses, and its worker command line is one
// psflow-worker accepts: the model, config and flags are run for one step on synthetic data
// (the datasets they name are not on this machine, except Fashion-MNIST).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/read_file.h"
#include "operator/api/training_job.h"
#include "tests/test_util.h"

namespace psflow::testing {
namespace {

std::vector<std::string> ExampleManifests() {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(SourceDir() + "/deploy/examples")) {
    if (e.path().extension() == ".yaml") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(ExampleManifests, OnePerModelAndEachWorkerCommandLineRuns) {
  const std::vector<std::string> paths = ExampleManifests();
  std::set<std::string> names;
  for (const auto& p : paths) names.insert(std::filesystem::path(p).stem());
  for (const char* expected :
       {"mnist-mlp", "mnist-cnn", "cifar10", "ptb-small", "ptb-medium", "ptb-large", "tabular"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }
  for (const auto& path : paths) {
    auto job = api::LoadTrainingJob(path);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_TRUE(job->replica_specs.count(api::ReplicaType::kWorker)) << path;
    const api::Container& worker = job->replica_specs.at(api::ReplicaType::kWorker).MainContainer();
    ASSERT_EQ(worker.command, std::vector<std::string>{"psflow-worker"}) << path;
    std::vector<std::string> argv = {Binary("psflow-worker")};
    const std::string scratch =
        ::testing::TempDir() + "/examples_test_" + std::filesystem::path(path).stem().string();
    std::filesystem::create_directories(scratch);
    for (const std::string& arg : worker.args) {
      // The export goes to a scratch folder here, not to the pod's volume.
      argv.push_back(arg.rfind("--export_dir=", 0) == 0 ? "--export_dir=" + scratch + "/export"
                                                        : arg);
    }
    if (!job->model_file.empty()) {  // as the operator mounts it
      std::ofstream(scratch + "/model.yaml") << job->model_file;
      argv.push_back("--model_file=" + scratch + "/model.yaml");
    }
    for (const char* extra :
         {"--data_source=synthetic", "--train_steps=1", "--log_every_steps=0"}) {
      argv.push_back(extra);
    }
    const CommandResult r =
        RunCommand(argv, Environment({}, {"TF_CONFIG"}), std::chrono::seconds(300));
    EXPECT_TRUE(r.status.ok()) << path << ": " << r.status.Describe() << "\n" << r.output;
    EXPECT_EQ(LinesWith(r.output, "worker 0 done: steps=1 ").size(), 1u) << path << r.output;
    std::filesystem::remove_all(scratch);
  }
}

// `psflow validate` passes every example, CPU and GPU (the GPU's flags are checked without a
// GPU), each replica type's args checked by its own program.
TEST(ExampleManifests, EachPassesPsflowValidateWithEveryReplicaTypeChecked) {
  std::vector<std::string> paths = ExampleManifests();
  for (const auto& e : std::filesystem::directory_iterator(SourceDir() + "/deploy/examples/gpu")) {
    if (e.path().extension() == ".yaml") paths.push_back(e.path().string());
  }
  ASSERT_EQ(paths.size(), 14u);
  for (const auto& path : paths) {
    auto job = api::LoadTrainingJob(path);
    ASSERT_TRUE(job.ok()) << job.status();
    const CommandResult r = RunCommand({Binary("psflow"), "validate", path},
                                       Environment({}, {"TF_CONFIG"}), std::chrono::seconds(120));
    EXPECT_TRUE(r.status.ok()) << path << ": " << r.status.Describe() << "\n" << r.output;
    for (const auto& [type, spec] : job->replica_specs) {
      if (spec.replicas == 0) continue;
      EXPECT_EQ(LinesWith(r.output, absl::StrCat(path, ": spec.replicaSpecs.",
                                                 api::ReplicaTypeName(type), ": valid: "))
                    .size(),
                1u)
          << path << "\n"
          << r.output;
    }
  }
}

// The tabular example's inline model is deploy/models/tabular/model.yaml, which the docs and
// tests/own_model_test run as a file: one model, not two that drift apart.
TEST(ExampleManifests, TheTabularExamplesInlineModelIsItsModelFile) {
  auto job = api::LoadTrainingJob(SourceDir() + "/deploy/examples/tabular.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->model_file, ReadFile(SourceDir() + "/deploy/models/tabular/model.yaml").value());
}

}  // namespace
}  // namespace psflow::testing
