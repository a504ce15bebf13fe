#include "operator/local/replica_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "operator/api/cluster_spec_builder.h"

namespace psflow::local {
namespace {

api::TrainingJob Job(const std::string& worker_command, const std::string& env = "") {
  const std::string yaml = absl::StrCat(
      "apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: j}\nspec:\n"
      "  replicaSpecs:\n"
      "    PS:\n      replicas: 1\n      template: {spec: {containers: [{name: psflow, "
      "command: [psflow-ps]}]}}\n"
      "    Worker:\n      replicas: 2\n      template: {spec: {containers: [{name: psflow, "
      "command: ",
      worker_command, ", args: [--model=mnist_cnn]", env, "}]}}\n");
  absl::StatusOr<api::TrainingJob> job = api::ParseTrainingJob(yaml, "job.yaml");
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

TEST(CheckedProgram, IsTheCommandsFileNameWhereItIsAPsflowProgram) {
  const struct {
    std::vector<std::string> command;
    std::string program;
  } cases[] = {
      {{"psflow-worker"}, "psflow-worker"},
      {{"psflow-ps", "--x"}, "psflow-ps"},
      {{"/usr/local/bin/psflow-worker"}, "psflow-worker"},
      {{"./psflow-ps"}, "psflow-ps"},
      {{"sh", "-c", "psflow-worker"}, ""},
      {{"psflow"}, ""},
      {{"psflow-worker.sh"}, ""},
      {{}, ""},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(CheckedProgram(c.command), c.program) << (c.command.empty() ? "" : c.command[0]);
  }
}

TEST(CheckOutputLine, TakesAbslsFirstErrorElseTheLastLineWithoutTheProgramsName) {
  const struct {
    std::string output;
    std::string line;
  } cases[] = {
      {"psflow-worker: valid: worker 0\n", "valid: worker 0"},
      {"I1207 log line\npsflow-worker: --batch_size must be >= 1\n", "--batch_size must be >= 1"},
      {"ERROR: Unknown command line flag 'learning_rat'. Did you mean: learning_rate ?\n"
       "ERROR: Unknown command line flag 'x'\n",
       "ERROR: Unknown command line flag 'learning_rat'. Did you mean: learning_rate ?"},
      {"psflow-worker: bad\n\n  \n", "bad"},
      {"other: message", "other: message"},
      {"", ""},
      {"\n\n", ""},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(CheckOutputLine(c.output, "psflow-worker"), c.line) << c.output;
  }
  EXPECT_EQ(CheckOutputLine("psflow-ps: bad\n", "psflow-ps"), "bad");
}

TEST(ModelFileArgs, TakesBothSpellingsInOrder) {
  EXPECT_EQ(ModelFileArgs({"--model_file=a.yaml", "--batch_size=3", "--model_file", "b.yaml",
                           "-model_file=c", "--model_file"}),
            (std::vector<std::string>{"a.yaml", "b.yaml", "c"}));
  EXPECT_EQ(ModelFileArgs({"--model=mnist_mlp"}), std::vector<std::string>{});
}

TEST(ReplicaEnvironment, LayersTheInheritedTheContainersAndPsflowsOwn) {
  const api::TrainingJob job =
      Job("[psflow-worker]",
          ", env: [{name: A, value: mine}, {name: TF_CONFIG, value: ignored}, "
          "{name: S, valueFrom: {secretKeyRef: {name: s, key: k}}}]");
  const ClusterSpec cluster = api::BuildClusterSpec(
      job, [](api::ReplicaType t, int i) { return absl::StrCat(api::TaskTypeName(t), i, ":1"); });
  const std::map<std::string, std::string> env =
      ReplicaEnvironment({{"A", "inherited"}, {"S", "kept"}, {"PATH", "/bin"}}, job,
                         api::ReplicaType::kWorker, 1, cluster);
  EXPECT_EQ(env.at("A"), "mine");
  EXPECT_EQ(env.at("S"), "kept");  // valueFrom: the kubelet's, not set here
  EXPECT_EQ(env.at("PATH"), "/bin");
  EXPECT_EQ(env.at("TF_CONFIG"), ToTfConfig(api::ForTask(cluster, api::ReplicaType::kWorker, 1)));
  EXPECT_EQ(env.at("PSFLOW_JOB_NAME"), "j");
  EXPECT_EQ(env.at("PSFLOW_REPLICA_TYPE"), "worker");
  EXPECT_EQ(env.at("PSFLOW_REPLICA_INDEX"), "1");
  EXPECT_EQ(env.size(), 7u);
}

// The checks of the real programs are tests/bad_input_test.cc's (they need the built binaries);
// here, what is not checked and why.
TEST(CheckReplicas, SaysWhyATypeIsNotChecked) {
  const ReplicaCheckOptions options{.inherited = {{"PATH", "/nonexistent"}},
                                    .temp_dir = ::testing::TempDir()};
  const std::vector<ReplicaCheck> checks = CheckReplicas(Job("[sh, -c, 'exit 0']"), options);
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].type, api::ReplicaType::kPS);
  EXPECT_EQ(checks[0].result, ReplicaCheck::Result::kNotChecked);
  EXPECT_EQ(checks[0].line, "cannot run \"psflow-ps\": not found in PATH (/nonexistent)");
  EXPECT_EQ(checks[1].type, api::ReplicaType::kWorker);
  EXPECT_EQ(checks[1].result, ReplicaCheck::Result::kNotChecked);
  EXPECT_EQ(checks[1].line, "its command \"sh\" is not psflow-ps or psflow-worker");
  EXPECT_EQ(FirstRefusal(checks), "");

  api::TrainingJob pod_file = Job("[psflow-worker]");
  pod_file.replica_specs.at(api::ReplicaType::kWorker).containers[0].args = {
      "--model_file=/in/the/pod.yaml"};
  EXPECT_EQ(CheckReplicas(pod_file, options)[1].line,
            "its --model_file=/in/the/pod.yaml is not on this machine (a file the pod mounts?)");

  // What a kubelet or the pod gives the args.
  const struct {
    std::vector<std::string> args;
    std::string line;
  } cases[] = {
      {{"--batch_size=$(BATCH)"},
       "its args use $(VAR) (--batch_size=$(BATCH)), which only a kubelet expands"},
      {{"--flagfile=/etc/flags"}, "its args take flags from elsewhere (--flagfile)"},
      {{"--fromenv", "batch_size"}, "its args take flags from elsewhere (--fromenv)"},
      {{"-tryfromenv=batch_size"}, "its args take flags from elsewhere (--tryfromenv)"},
  };
  for (const auto& c : cases) {
    api::TrainingJob job = Job("[psflow-worker]");
    job.replica_specs.at(api::ReplicaType::kWorker).containers[0].args = c.args;
    const ReplicaCheck check = CheckReplicas(job, options)[1];
    EXPECT_EQ(check.result, ReplicaCheck::Result::kNotChecked) << c.line;
    EXPECT_EQ(check.line, c.line);
  }
}

TEST(FirstRefusal, NamesTheReplicaTypeAndTheProgram) {
  const std::vector<ReplicaCheck> checks = {{.type = api::ReplicaType::kPS,
                                             .program = "psflow-ps",
                                             .result = ReplicaCheck::Result::kNotChecked,
                                             .line = "no"},
                                            {.type = api::ReplicaType::kWorker,
                                             .program = "psflow-worker",
                                             .result = ReplicaCheck::Result::kInvalid,
                                             .line = "--batch_size must be >= 1"},
                                            {.type = api::ReplicaType::kEvaluator,
                                             .program = "psflow-worker",
                                             .result = ReplicaCheck::Result::kInvalid,
                                             .line = "later"}};
  EXPECT_EQ(FirstRefusal(checks),
            "spec.replicaSpecs.Worker: psflow-worker refuses its args: --batch_size must be >= 1");
}

}  // namespace
}  // namespace psflow::local
