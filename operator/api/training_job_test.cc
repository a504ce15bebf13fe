#include "operator/api/training_job.h"

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "operator/api/job_policy.h"

namespace psflow::api {
namespace {

constexpr char kValid[] = R"(
apiVersion: psflow.io/v1alpha1
kind: TrainingJob
metadata: {name: demo, namespace: ml}
spec:
  successPolicy: AllWorkers
  runPolicy: {activeDeadlineSeconds: 60, backoffLimit: 3, cleanPodPolicy: All,
              finishGraceSeconds: 90}
  replicaSpecs:
    PS:
      replicas: 2
      template:
        spec:
          containers:
            - name: sidecar
              image: busybox
            - name: psflow
              image: psflow/ps:0.1.0
              command: [psflow-ps]
              ports: [{name: psflow-port, containerPort: 3333}]
    Worker:
      replicas: 3
      restartPolicy: ExitCode
      template:
        spec:
          containers:
            - name: psflow
              image: psflow/worker:0.1.0
              command: [psflow-worker]
              args: [--train_steps=5]
              env: [{name: A, value: "1"}]
)";

// metadata.name as the CRD has it (deploy/crd: maxLength 48, a DNS-1035 label), row by row.
TEST(TrainingJob, JobNamesFollowTheCrdsRule) {
  const std::vector<std::pair<std::string, bool>> rows = {
      {"a", true},
      {"mnist-mlp", true},
      {"x9", true},
      {std::string(48, 'a'), true},
      {std::string(49, 'a'), false},
      {"", false},
      {"9lives", false},
      {"-a", false},
      {"a-", false},
      {"Mnist", false},
      {"a_b", false},
      {"a.b", false},
      {"../../escaped", false},
      {"/abs/path", false},
      {"a b", false},
      {"a\nb", false},
      {"\xff\xfe", false},
  };
  for (const auto& [name, ok] : rows) {
    const absl::Status s = CheckJobName(name);
    EXPECT_EQ(s.ok(), ok) << absl::CHexEscape(name) << ": " << s;
    if (!ok) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_TRUE(absl::StartsWith(s.message(), "metadata.name: must be at most 48")) << s;
    }
  }
}

TEST(TrainingJob, ParsesTheFieldsPsflowUses) {
  auto job = ParseTrainingJob(kValid, "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->name, "demo");
  EXPECT_EQ(job->namespace_, "ml");
  EXPECT_EQ(job->Replicas(ReplicaType::kPS), 2);
  EXPECT_EQ(job->Replicas(ReplicaType::kWorker), 3);
  EXPECT_EQ(job->Replicas(ReplicaType::kChief), 0);
  EXPECT_EQ(job->success_policy, SuccessPolicy::kAllWorkers);
  EXPECT_EQ(job->run_policy.active_deadline_seconds, 60);
  EXPECT_EQ(job->run_policy.finish_grace_seconds, 90);
  EXPECT_EQ(FinishGrace(*job), absl::Seconds(90));
  EXPECT_EQ(job->run_policy.backoff_limit, 3);
  EXPECT_EQ(job->run_policy.clean_pod_policy, CleanPodPolicy::kAll);
  const ReplicaSpec& ps = job->replica_specs.at(ReplicaType::kPS);
  EXPECT_EQ(ps.MainContainer().name, "psflow");
  EXPECT_EQ(ps.Port(), 3333);
  const ReplicaSpec& worker = job->replica_specs.at(ReplicaType::kWorker);
  EXPECT_EQ(worker.restart_policy, RestartPolicy::kExitCode);
  EXPECT_EQ(worker.Port(), kDefaultPort);
  EXPECT_EQ(worker.MainContainer().args, std::vector<std::string>{"--train_steps=5"});
  EXPECT_EQ(worker.MainContainer().env.at(0).value, "1");
  EXPECT_TRUE(job->tls);  // on unless the spec opts out
}

TEST(TrainingJob, SpecTlsEnabledFalseOptsOutOfMutualTls) {
  const std::string job = std::string(kValid) + "  tls: {enabled: false}\n";
  auto off = ParseTrainingJob(job, "job.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->tls);
  auto on = ParseTrainingJob(std::string(kValid) + "  tls: {enabled: true}\n", "job.yaml");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->tls);
}

TEST(TrainingJob, SpecSharedMemoryIsOffByDefault) {
  auto none = ParseTrainingJob(kValid, "job.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->shared_memory.enabled);
  auto on = ParseTrainingJob(std::string(kValid) + "  sharedMemory: {enabled: true}\n", "job.yaml");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->shared_memory.enabled);
}

// spec.modelFile: a model file's text, checked as the worker checks it, and the only model the
// training replicas are given.
TEST(TrainingJob, SpecModelFileIsAValidModelAndTheOnlyOne) {
  const std::string model =
      "  modelFile: |\n    name: m\n    input: {shape: [4]}\n    classes: 3\n    layers:\n"
      "      - {type: dense, units: 3}\n    data: {format: csv}\n";
  auto job = ParseTrainingJob(std::string(kValid) + model, "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->model_file,
            "name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
            "data: {format: csv}\n");
  EXPECT_TRUE(ParseTrainingJob(kValid, "job.yaml")->model_file.empty());

  std::string bad = model;
  bad.replace(bad.find("units: 3"), 8, "units: 5");
  auto wrong = ParseTrainingJob(std::string(kValid) + bad, "job.yaml");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(std::string(wrong.status().message()),
            "job.yaml: spec.modelFile: the last layer, layer 0 (dense \"dense0\"), produces 5 "
            "values per prediction (output 5), but the model has classes: 3 (its logits)");

  std::string two = std::string(kValid) + model;
  two.replace(two.find("--train_steps=5"), 15, "--model=mnist_cnn");
  auto both = ParseTrainingJob(two, "job.yaml");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(std::string(both.status().message()),
            "job.yaml: spec.replicaSpecs.Worker: passes --model=mnist_cnn, but spec.modelFile "
            "gives the model: remove one");
  // The other spellings absl reads: one dash, the value as the next argument.
  for (const std::string flag : {"-model_file=m.yaml", "--model_file, m.yaml", "-model_config"}) {
    std::string other = std::string(kValid) + model;
    other.replace(other.find("--train_steps=5"), 15, flag);
    auto refused = ParseTrainingJob(other, "job.yaml");
    EXPECT_FALSE(refused.ok()) << flag;
    EXPECT_NE(refused.status().message().find("but spec.modelFile gives the model"),
              absl::string_view::npos)
        << refused.status();
  }
}

TEST(TrainingJob, FlagArgumentsAsAbslReadsThem) {
  const auto name = [](absl::string_view arg) { return ParseFlagArgument(arg).name; };
  EXPECT_EQ(name("--model_file=a.yaml"), "model_file");
  EXPECT_EQ(name("-model_file=a.yaml"), "model_file");
  EXPECT_EQ(name("--model_file"), "model_file");
  EXPECT_EQ(name("-v"), "v");
  EXPECT_EQ(name("positional"), "");
  EXPECT_EQ(ParseFlagArgument("--a=b=c").value, std::optional<std::string>("b=c"));
  EXPECT_EQ(ParseFlagArgument("--a=").value, std::optional<std::string>(""));
  EXPECT_FALSE(ParseFlagArgument("--a").value.has_value());
}

TEST(TrainingJob, TheDemoManifestIsValid) {
  auto job = LoadTrainingJob(PSFLOW_SOURCE_DIR "/deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->Replicas(ReplicaType::kPS), 1);
  EXPECT_EQ(job->Replicas(ReplicaType::kWorker), 2);
}

TEST(TrainingJob, BadManifestsGiveOneLineNamingTheField) {
  struct Case {
    std::string yaml, reason;
  };
  const std::string head =
      "apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: x}\n";
  const std::string worker =
      "    Worker: {replicas: 1, template: {spec: {containers: [{name: psflow, command: [w]}]}}}\n";
  const std::vector<Case> cases = {
      {"key: [unclosed", "not valid YAML"},
      {"key: " + std::string(3000, '['),
       "not valid YAML: nested deeper than the YAML parser allows"},
      {"- a\n- b\n", "must be a YAML object"},
      {"apiVersion: v1\nkind: TrainingJob\n", "apiVersion: must be psflow.io/v1alpha1"},
      {"kind: TrainingJob\n", "apiVersion: is required (a string)"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{name: psflow, "
              "command: "
              "[w], env: [{value: x}]}]}}}\n",
       "spec.replicaSpecs.Worker.template.spec.containers[0].env[0].name: is required"},
      {head + "spec:\n  replicaSpecs:\n    [Worker]: {replicas: 1}\n",
       "spec.replicaSpecs.?: unknown replica type"},
      {"apiVersion: psflow.io/v1alpha1\nkind: Pod\n", "kind: must be TrainingJob"},
      {"apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nspec: {}\n", "metadata.name"},
      {"apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: ../../escaped}\n",
       "metadata.name: must be at most 48 lowercase letters"},
      {head, "spec: is missing"},
      {head + "spec:\n  replicaSpecs: {}\n", "spec.replicaSpecs: must map"},
      {head + "spec:\n  replicaSpecs:\n" + worker + "    Master: {replicas: 1}\n",
       "spec.replicaSpecs.Master: unknown replica type"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {replicas: 0, template: {spec: {containers: "
              "[{name: psflow, command: [w]}]}}}\n",
       "needs at least one Worker"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {replicas: 2, template: {spec: {containers: "
              "[{name: psflow, command: [w]}]}}}\n",
       "spec.replicaSpecs: 2 Chief and Worker replicas need at least one PS replica"},
      {head + "spec:\n  replicaSpecs:\n" + worker +
           "    Evaluator: {replicas: 1, template: {spec: {containers: [{name: psflow, command: "
           "[w]}]}}}\n",
       "spec.replicaSpecs: an Evaluator evaluates what the PS replicas hold"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {replicas: -1, template: {spec: {containers: "
              "[{name: psflow, command: [w]}]}}}\n",
       "Worker.replicas: must be in 0..1000"},
      {head + "spec:\n  replicaSpecs:\n" + worker +
           "    PS: {replicas: 101, template: {spec: {containers: [{name: psflow, command: "
           "[p]}]}}}\n",
       "PS.replicas: must be in 0..100"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {replicas: two}\n", "must be an integer"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {replicas: \"2\", template: {spec: "
              "{containers: [{name: psflow, command: [w]}]}}}\n",
       "spec.replicaSpecs.Worker.replicas: must be an integer, got the string \"2\""},
      {head + "spec:\n  tls: {enabled: \"false\"}\n  replicaSpecs:\n" + worker,
       "spec.tls.enabled: must be a boolean, got the string \"false\""},
      {head + "spec:\n  replicaSpecs:\n    Worker: {replicas: 1}\n",
       "Worker.template.spec.containers: must list at least one container"},
      {head + "spec:\n  replicaSpecs:\n" + worker +
           "    Chief: {replicas: 2, template: {spec: "
           "{containers: [{name: psflow, command: [c]}]}}}\n",
       "Chief.replicas: must be in 0..1"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {restartPolicy: Sometimes, template: {spec: "
              "{containers: [{name: psflow, command: [w]}]}}}\n",
       "\"Sometimes\" is not one of Never, OnFailure, Always, ExitCode"},
      {head + "spec:\n  runPolicy: {backoffLimit: -2}\n  replicaSpecs:\n" + worker,
       "spec.runPolicy.backoffLimit: must be >= 0"},
      {head + "spec:\n  runPolicy: {finishGraceSeconds: -1}\n  replicaSpecs:\n" + worker,
       "spec.runPolicy.finishGraceSeconds: must be >= 0"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{name: psflow, "
              "command: "
              "w}]}}}\n",
       "command: must be a list of strings"},
      {head + "spec:\n  tls: {enabled: maybe}\n  replicaSpecs:\n" + worker,
       "spec.tls.enabled: must be a boolean, got \"maybe\""},
      {head + "spec:\n  tls: {enable: false}\n  replicaSpecs:\n" + worker,
       "spec.tls.enable: unknown field (known: enabled)"},
      {head + "spec:\n  runPolicyy: {backoffLimit: 1}\n  replicaSpecs:\n" + worker,
       "spec.runPolicyy: unknown field (known: replicaSpecs, runPolicy,"},
      {head + "spec:\n  runPolicy: {activeDeadlineSecond: 10}\n  replicaSpecs:\n" + worker,
       "spec.runPolicy.activeDeadlineSecond: unknown field (known: cleanPodPolicy,"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {replica: 3, template: {spec: {containers: "
              "[{name: psflow, command: [w]}]}}}\n",
       "spec.replicaSpecs.Worker.replica: unknown field (known: replicas,"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {replicas: 3, replicas: 1, template: {spec: "
              "{containers: [{name: psflow, command: [w]}]}}}\n",
       "spec.replicaSpecs.Worker.replicas: given twice"},
      {head + "spec:\n  replicaSpecs:\n" + worker + worker,
       "spec.replicaSpecs.Worker: given twice"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{name: psflow, "
              "command: "
              "[w], env: [{name: A, value: x, value: y}]}]}}}\n",
       "spec.replicaSpecs.Worker.template.spec.containers[0].env[0].value: given twice"},
      // The pod's own rules for the names psflow reads, before the API server refuses the pod.
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{command: "
              "[w]}]}}}\n",
       "spec.replicaSpecs.Worker.template.spec.containers[0].name: is required"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{name: "
              "Main}]}}}\n",
       "containers[0].name: must be at most 63 lowercase letters, digits and '-', starting and "
       "ending with a letter or digit (a DNS-1123 label), got \"Main\""},
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{name: a}, "
              "{name: a}]}}}\n",
       "containers[1].name: \"a\" names another container too"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{name: a, "
              "env: [{name: A=B, value: x}]}]}}}\n",
       "containers[0].env[0].name: must be printable ASCII without '=' (an environment "
       "variable's name), got \"A=B\""},
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{name: a, "
              "ports: [{name: psflow_port, containerPort: 1}]}]}}}\n",
       "containers[0].ports[0].name: must be at most 15 lowercase letters"},
      {head + "spec:\n  replicaSpecs:\n    Worker: {template: {spec: {containers: [{name: a, "
              "ports: [{name: p, containerPort: 1}, {name: p, containerPort: 2}]}]}}}\n",
       "containers[0].ports[1].name: \"p\" names another port too"},
      {head + "spec:\n  replicaSpecs:\n" + worker + "---\n" + head,
       "holds 2 YAML documents; give one TrainingJob per file"},
      {head + "spec:\n  tls: false\n  replicaSpecs:\n" + worker, "spec.tls: must be an object"},
      {head + "spec:\n  sharedMemory: true\n  replicaSpecs:\n" + worker,
       "spec.sharedMemory: must be an object (enabled)"},
      {head + "spec:\n  sharedMemory: {enabled: yes please}\n  replicaSpecs:\n" + worker,
       "spec.sharedMemory.enabled: must be a boolean"},
      // The node's directory is the operator's (--shared_memory_dir), not the job author's.
      {head + "spec:\n  sharedMemory: {enabled: true, hostPath: /etc}\n  replicaSpecs:\n" + worker,
       "spec.sharedMemory.hostPath: unknown field (known: enabled)"},
      {head + "spec:\n  sharedMemory: {hostPath: \"\"}\n  replicaSpecs:\n" + worker,
       "spec.sharedMemory.hostPath: unknown field (known: enabled)"},
  };
  for (const Case& c : cases) {
    auto job = ParseTrainingJob(c.yaml, "bad.yaml");
    ASSERT_FALSE(job.ok()) << c.yaml;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(job.status().message());
    EXPECT_NE(message.find(c.reason), std::string::npos) << message;
    EXPECT_EQ(message.rfind("bad.yaml: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// A job's head up to `spec:`, and replicas whose PS spec a test may extend (checkpoint: ...).
constexpr char kHead[] =
    "apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: x}\nspec:\n";
constexpr char kReplicas[] =
    "  replicaSpecs:\n"
    "    Worker: {template: {spec: {containers: [{name: psflow, command: [w]}]}}}\n"
    "    PS:\n"
    "      template: {spec: {containers: [{name: psflow, command: [p]}]}}\n";

TEST(TrainingJob, ParsesThePsCheckpointVolumeAndTheNetworkPolicy) {
  const std::string head = kHead;
  const std::string replicas = kReplicas;
  auto none = ParseTrainingJob(head + replicas, "job.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->replica_specs.at(ReplicaType::kPS).checkpoint.has_value());
  EXPECT_FALSE(none->network_policy.enabled);

  auto empty_dir = ParseTrainingJob(
      head + "  networkPolicy: {enabled: true, metricsFrom: [{podSelector: {}}]}\n" + replicas +
          "      checkpoint: {sizeLimit: 2Gi}\n",
      "job.yaml");
  ASSERT_TRUE(empty_dir.ok()) << empty_dir.status();
  EXPECT_TRUE(empty_dir->network_policy.enabled);
  const auto& local = empty_dir->replica_specs.at(ReplicaType::kPS).checkpoint;
  ASSERT_TRUE(local.has_value());
  EXPECT_EQ(local->kind, CheckpointVolumeKind::kEmptyDir);
  EXPECT_EQ(local->size_limit, "2Gi");
  EXPECT_EQ(local->claim_name, "");

  auto claim = ParseTrainingJob(
      head + replicas + "      checkpoint: {volume: persistentVolumeClaim, claimName: ckpt}\n",
      "job.yaml");
  ASSERT_TRUE(claim.ok()) << claim.status();
  const auto& kept = claim->replica_specs.at(ReplicaType::kPS).checkpoint;
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->kind, CheckpointVolumeKind::kPersistentVolumeClaim);
  EXPECT_EQ(kept->claim_name, "ckpt");
}

TEST(TrainingJob, BadCheckpointsAndNetworkPoliciesGiveOneLineNamingTheField) {
  const std::string head = kHead;
  const std::string replicas = kReplicas;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + replicas + "      checkpoint: {volume: hostPath}\n",
       "bad.yaml: spec.replicaSpecs.PS.checkpoint.volume: \"hostPath\" is not one of emptyDir, "
       "persistentVolumeClaim"},
      {head + replicas + "      checkpoint: {volume: persistentVolumeClaim}\n",
       "bad.yaml: spec.replicaSpecs.PS.checkpoint.claimName: names the PersistentVolumeClaim of "
       "volume persistentVolumeClaim; it is missing"},
      {head + replicas + "      checkpoint: {claimName: c}\n",
       "bad.yaml: spec.replicaSpecs.PS.checkpoint.claimName: applies to volume "
       "persistentVolumeClaim only"},
      {head + replicas +
           "      checkpoint: {volume: persistentVolumeClaim, claimName: c, sizeLimit: 1Gi}\n",
       "bad.yaml: spec.replicaSpecs.PS.checkpoint.sizeLimit: applies to volume emptyDir only (a "
       "claim's size is the claim's)"},
      {head + replicas + "      checkpoint: {sizeLimit: lots}\n",
       "bad.yaml: spec.replicaSpecs.PS.checkpoint.sizeLimit: \"lots\" is not a size (e.g. 512Mi, "
       "10Gi)"},
      {head + replicas + "      checkpoint: emptyDir\n",
       "bad.yaml: spec.replicaSpecs.PS.checkpoint: must be an object"},
      {head + "  replicaSpecs:\n    Worker: {checkpoint: {}, template: {spec: {containers: [{name: "
              "psflow, command: "
              "[w]}]}}}\n",
       "bad.yaml: spec.replicaSpecs.Worker.checkpoint: only PS replicas checkpoint (they hold the "
       "variables)"},
      {head + "  networkPolicy: true\n" + replicas,
       "bad.yaml: spec.networkPolicy: must be an object"},
      {head + "  networkPolicy: {enabled: sometimes}\n" + replicas,
       "bad.yaml: spec.networkPolicy.enabled: must be a boolean, got \"sometimes\""},
      {head + "  networkPolicy: {metricsFrom: [monitoring]}\n" + replicas,
       "bad.yaml: spec.networkPolicy.metricsFrom[0]: must be a NetworkPolicyPeer (podSelector, "
       "namespaceSelector or ipBlock)"},
  };
  for (const auto& [yaml, message] : cases) {
    auto job = ParseTrainingJob(yaml, "bad.yaml");
    ASSERT_FALSE(job.ok()) << yaml;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(job.status().message(), message);
  }
}

TEST(TrainingJob, ParsesPodFailurePolicyRules) {
  const std::string head = kHead;
  const std::string replicas = kReplicas;
  auto job = ParseTrainingJob(head + replicas +
                                  "      podFailurePolicy:\n"
                                  "        rules:\n"
                                  "          - {action: FailJob, onExitCodes: {operator: In, "
                                  "values: [3, 2]}}\n"
                                  "          - {action: Ignore, onPodConditions: [{type: "
                                  "DisruptionTarget}, {type: X, status: \"False\"}]}\n"
                                  "          - {action: Count, onExitCodes: {operator: NotIn, "
                                  "values: [0, 1]}}\n",
                              "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  const std::vector<FailureRule>& rules = job->replica_specs.at(ReplicaType::kPS).failure_rules;
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].action, FailureAction::kFailJob);
  ASSERT_TRUE(rules[0].on_exit_codes.has_value());
  EXPECT_TRUE(rules[0].on_exit_codes->in);
  EXPECT_EQ(rules[0].on_exit_codes->values, (std::vector<int>{2, 3}));  // sorted
  EXPECT_EQ(rules[1].action, FailureAction::kIgnore);
  ASSERT_EQ(rules[1].on_pod_conditions.size(), 2u);
  EXPECT_EQ(rules[1].on_pod_conditions[0].type, "DisruptionTarget");
  EXPECT_EQ(rules[1].on_pod_conditions[0].status, "True");  // the default
  EXPECT_EQ(rules[1].on_pod_conditions[1].status, "False");
  EXPECT_EQ(rules[2].action, FailureAction::kCount);
  EXPECT_FALSE(rules[2].on_exit_codes->in);
  EXPECT_TRUE(job->replica_specs.at(ReplicaType::kWorker).failure_rules.empty());
}

TEST(TrainingJob, BadPodFailurePoliciesGiveOneLineNamingTheField) {
  const std::string head = kHead;
  const std::string replicas = kReplicas;
  const std::string policy = "      podFailurePolicy: ";
  const std::string at = "bad.yaml: spec.replicaSpecs.PS.podFailurePolicy";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[]", at + ": must be an object (rules)"},
      {"{}", at + ".rules: must list at least one rule"},
      {"{rules: [{onExitCodes: {operator: In, values: [1]}}]}",
       at + ".rules[0].action: is required (FailJob, Count or Ignore)"},
      {"{rules: [{action: Retry, onExitCodes: {operator: In, values: [1]}}]}",
       at + ".rules[0].action: \"Retry\" is not one of FailJob, Count, Ignore"},
      {"{rules: [{action: Ignore}]}",
       at + ".rules[0]: must give exactly one of onExitCodes and onPodConditions"},
      {"{rules: [{action: Ignore, onExitCodes: {operator: In, values: [1]}, onPodConditions: "
       "[{type: A}]}]}",
       at + ".rules[0]: must give exactly one of onExitCodes and onPodConditions"},
      {"{rules: [{action: Ignore, onExitCodes: {values: [1]}}]}",
       at + ".rules[0].onExitCodes.operator: is required (In or NotIn)"},
      {"{rules: [{action: Ignore, onExitCodes: {operator: Is, values: [1]}}]}",
       at + ".rules[0].onExitCodes.operator: \"Is\" is not one of In, NotIn"},
      {"{rules: [{action: Ignore, onExitCodes: {operator: In, values: []}}]}",
       at + ".rules[0].onExitCodes.values: must list at least one exit code"},
      {"{rules: [{action: Ignore, onExitCodes: {operator: In, values: [0]}}]}",
       at + ".rules[0].onExitCodes.values[0]: 0 is success, never a failure: operator In cannot "
            "list it"},
      {"{rules: [{action: Ignore, onExitCodes: {operator: NotIn, values: [256]}}]}",
       at + ".rules[0].onExitCodes.values[0]: must be an exit code in 0..255"},
      {"{rules: [{action: Ignore, onExitCodes: {operator: In, values: [3, 3]}}]}",
       at + ".rules[0].onExitCodes.values[1]: 3 is listed twice"},
      {"{rules: [{action: Ignore, onPodConditions: []}]}",
       at + ".rules[0].onPodConditions: must list at least one pod condition (type, status)"},
      {"{rules: [{action: Ignore, onPodConditions: [{status: \"True\"}]}]}",
       at + ".rules[0].onPodConditions[0].type: is required (e.g. DisruptionTarget)"},
      {"{rules: [{action: Ignore, onPodConditions: [{type: A, status: Yes}]}]}",
       at + ".rules[0].onPodConditions[0].status: \"Yes\" is not one of True, False, Unknown"},
  };
  for (const auto& [rules, message] : cases) {
    const std::string yaml = head + replicas + policy + rules + "\n";
    auto job = ParseTrainingJob(yaml, "bad.yaml");
    ASSERT_FALSE(job.ok()) << yaml;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(job.status().message(), message) << rules;
  }
  std::string many = "{rules: [";
  for (int i = 0; i < 21; ++i) {
    absl::StrAppend(&many, i ? ", " : "",
                    "{action: Ignore, onExitCodes: {operator: In, values: [1]}}");
  }
  auto job = ParseTrainingJob(head + replicas + policy + many + "]}\n", "bad.yaml");
  EXPECT_EQ(job.status().message(), at + ".rules: lists at most 20 rules");
}

TEST(TrainingJob, ParsesTheSchedulingPolicyAndRefusesWhatAGangCannotUse) {
  const std::string head = kHead;
  const std::string replicas = kReplicas;
  auto job =
      ParseTrainingJob(head +
                           "  runPolicy: {schedulingPolicy: {gang: volcano, queue: research, "
                           "priorityClass: high}}\n" +
                           replicas,
                       "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->run_policy.scheduling.gang, GangScheduler::kVolcano);
  EXPECT_EQ(job->run_policy.scheduling.queue, "research");
  EXPECT_EQ(job->run_policy.scheduling.priority_class, "high");
  EXPECT_EQ(job->run_policy.scheduling.SchedulerName(), "volcano");
  job = ParseTrainingJob(
      head + "  runPolicy: {schedulingPolicy: {gang: coscheduling}}\n" + replicas, "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->run_policy.scheduling.SchedulerName(), "scheduler-plugins-scheduler");
  job = ParseTrainingJob(head + replicas, "job.yaml");
  EXPECT_EQ(job->run_policy.scheduling.gang, GangScheduler::kNone);

  const std::string at = "bad.yaml: spec.runPolicy.schedulingPolicy";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{queue: q}", at + ".gang: is required (volcano or coscheduling)"},
      {"{gang: kueue}", at + ".gang: \"kueue\" is not one of volcano, coscheduling"},
      {"{gang: volcano, queue: \"\"}", at + ".queue: must not be empty"},
      {"{gang: coscheduling, queue: q}",
       at + ".queue: applies to gang volcano only (coscheduling has no queues; give the pods a "
            "priorityClassName in their template)"},
      {"volcano", at + ": must be an object (gang, queue, priorityClass, schedulerName)"},
  };
  for (const auto& [policy, message] : cases) {
    auto bad = ParseTrainingJob(
        head + "  runPolicy: {schedulingPolicy: " + policy + "}\n" + replicas, "bad.yaml");
    ASSERT_FALSE(bad.ok()) << policy;
    EXPECT_EQ(bad.status().message(), message) << policy;
  }
}

TEST(TrainingJob, MissingFileIsNotFound) {
  EXPECT_EQ(LoadTrainingJob("/nonexistent/job.yaml").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psflow::api
