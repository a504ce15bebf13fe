// deploy/crd/trainingjobs.psflow.io.yaml as the API server would apply it, through CrdSchema.
#include "tests/crd/crd_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/crd/yaml_json.h"

namespace psflow::kubetest {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const std::string kCrdPath =
    std::string(PSFLOW_SOURCE_DIR) + "/deploy/crd/trainingjobs.psflow.io.yaml";
const std::string kExamplesDir = std::string(PSFLOW_SOURCE_DIR) + "/deploy/examples";
constexpr char kPrefix[] = "TrainingJob.psflow.io \"mnist-mlp\" is invalid: ";

const CrdSchema& Crd() {
  static const CrdSchema* crd = [] {
    auto loaded = CrdSchema::Load(kCrdPath, "v1alpha1");
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return new CrdSchema(*std::move(loaded));
  }();
  return *crd;
}

json Example(const std::string& name) {
  auto example = LoadYamlFile(kExamplesDir + "/" + name + ".yaml");
  EXPECT_TRUE(example.ok()) << example.status();
  return example.ok() ? *example : json();
}

// What the API server does to a create request: prune, default, validate.
absl::Status Admit(json object, std::vector<std::string>* unknown = nullptr) {
  Crd().Prune(object, unknown);
  Crd().Default(object);
  return Crd().Validate(object);
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST(TrainingJobCrd, IsStructural) {
  const absl::Status structural = Crd().CheckStructural();
  EXPECT_TRUE(structural.ok()) << structural;
}

TEST(TrainingJobCrd, EveryExampleValidatesWithNothingPruned) {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kExamplesDir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++examples;
    SCOPED_TRACE(entry.path().string());
    auto manifest = LoadYamlFile(entry.path().string());
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    std::vector<std::string> unknown;
    const absl::Status admitted = Admit(*manifest, &unknown);
    EXPECT_TRUE(admitted.ok()) << admitted;
    EXPECT_THAT(unknown, IsEmpty());
  }
  EXPECT_GE(examples, 6);
}

TEST(TrainingJobCrd, AtMostOneChief) {
  json job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["Chief"] = job["spec"]["replicaSpecs"]["Worker"];
  job["spec"]["replicaSpecs"]["Chief"]["replicas"] = 2;
  EXPECT_EQ(
      Message(Admit(job)),
      std::string(kPrefix) +
          "spec.replicaSpecs.Chief.replicas: Invalid value: 2: spec.replicaSpecs.Chief.replicas "
          "in body should be less than or equal to 1");
  job["spec"]["replicaSpecs"]["Chief"]["replicas"] = 1;
  EXPECT_TRUE(Admit(job).ok());
}

TEST(TrainingJobCrd, NegativeReplicas) {
  json job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["PS"]["replicas"] = -1;
  EXPECT_EQ(
      Message(Admit(job)),
      std::string(kPrefix) +
          "spec.replicaSpecs.PS.replicas: Invalid value: -1: spec.replicaSpecs.PS.replicas in "
          "body should be greater than or equal to 0");
}

TEST(TrainingJobCrd, NegativeWorkersAlsoFailTheScaleSubresourceCheck) {
  json job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["Worker"]["replicas"] = -1;
  EXPECT_EQ(Message(Admit(job)),
            std::string(kPrefix) +
                "[spec.replicaSpecs.Worker.replicas: Invalid value: -1: "
                "spec.replicaSpecs.Worker.replicas in body should be greater than or equal to 0, "
                ".spec.replicaSpecs.Worker.replicas: Invalid value: -1: should be a non-negative "
                "integer]");
}

TEST(TrainingJobCrd, TooManyReplicas) {
  json job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["PS"]["replicas"] = 10001;
  EXPECT_EQ(
      Message(Admit(job)),
      std::string(kPrefix) +
          "spec.replicaSpecs.PS.replicas: Invalid value: 10001: spec.replicaSpecs.PS.replicas "
          "in body should be less than or equal to 10000");
}

TEST(TrainingJobCrd, UnknownRestartPolicy) {
  json job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes";
  EXPECT_EQ(Message(Admit(job)),
            std::string(kPrefix) +
                "spec.replicaSpecs.Worker.restartPolicy: Unsupported value: \"Sometimes\": "
                "supported values: \"Never\", \"OnFailure\", \"Always\", \"ExitCode\"");
}

TEST(TrainingJobCrd, CleanPodPolicyTypo) {
  json job = Example("mnist-mlp");
  job["spec"]["runPolicy"]["cleanPodPolicy"] = "Runing";
  EXPECT_EQ(Message(Admit(job)),
            std::string(kPrefix) +
                "spec.runPolicy.cleanPodPolicy: Unsupported value: \"Runing\": supported values: "
                "\"Running\", \"All\", \"None\"");
}

TEST(TrainingJobCrd, UnknownSuccessPolicyAndNegativeDeadline) {
  json job = Example("mnist-mlp");
  job["spec"]["successPolicy"] = "AnyWorker";
  job["spec"]["runPolicy"]["activeDeadlineSeconds"] = -5;
  EXPECT_EQ(
      Message(Admit(job)),
      std::string(kPrefix) +
          "[spec.runPolicy.activeDeadlineSeconds: Invalid value: -5: "
          "spec.runPolicy.activeDeadlineSeconds in body should be greater than or equal to 0, "
          "spec.successPolicy: Unsupported value: \"AnyWorker\": supported values: \"\", "
          "\"ChiefOrWorker0\", \"AllWorkers\"]");
}

TEST(TrainingJobCrd, ReplicasOfTheWrongType) {
  json job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["PS"]["replicas"] = "two";
  EXPECT_EQ(Message(Admit(job)),
            std::string(kPrefix) +
                "spec.replicaSpecs.PS.replicas: Invalid value: \"string\": "
                "spec.replicaSpecs.PS.replicas in body must be of type integer: \"string\"");
  // The scale subresource reads Worker.replicas as an int64 too.
  job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["Worker"]["replicas"] = "two";
  EXPECT_EQ(Message(Admit(job)),
            std::string(kPrefix) +
                "[spec.replicaSpecs.Worker.replicas: Invalid value: \"string\": "
                "spec.replicaSpecs.Worker.replicas in body must be of type integer: \"string\", "
                ".spec.replicaSpecs.Worker.replicas: Invalid value: 0: "
                ".spec.replicaSpecs.Worker.replicas accessor error: two is of the type string, "
                "expected int64]");
  // 2.5 is a number but not an integer (int32 format: the message names the format).
  job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["PS"]["replicas"] = 2.5;
  EXPECT_EQ(Message(Admit(job)),
            std::string(kPrefix) +
                "spec.replicaSpecs.PS.replicas: Invalid value: \"float64\": "
                "spec.replicaSpecs.PS.replicas in body must be of type int32: \"float64\"");
}

TEST(TrainingJobCrd, TemplateMustBeAnObject) {
  json job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["Worker"]["template"] = "psflow/worker:0.1.0";
  EXPECT_EQ(Message(Admit(job)),
            std::string(kPrefix) +
                "spec.replicaSpecs.Worker.template: Invalid value: \"string\": "
                "spec.replicaSpecs.Worker.template in body must be of type object: \"string\"");
}

TEST(TrainingJobCrd, SpecIsRequiredAndTypeMetaChecked) {
  json job = Example("mnist-mlp");
  job.erase("spec");
  EXPECT_EQ(Message(Admit(job)), std::string(kPrefix) + "spec: Required value");
  job = Example("mnist-mlp");
  job["spec"].erase("replicaSpecs");
  EXPECT_EQ(Message(Admit(job)), std::string(kPrefix) + "spec.replicaSpecs: Required value");
  job = Example("mnist-mlp");
  job["kind"] = "TrainingJobs";
  job["apiVersion"] = "psflow.io/v1";
  EXPECT_EQ(Message(Admit(job)),
            std::string(kPrefix) +
                "[kind: Invalid value: \"TrainingJobs\": must be TrainingJob, apiVersion: Invalid "
                "value: \"psflow.io/v1\": must be psflow.io/v1alpha1]");
}

TEST(TrainingJobCrd, JobNamesFitTheServiceNames) {
  json job = Example("mnist-mlp");
  job["metadata"]["name"] = std::string(49, 'a');
  EXPECT_EQ(Message(Admit(job)),
            "TrainingJob.psflow.io \"" + std::string(49, 'a') +
                "\" is invalid: metadata.name: Too long: must have at most 48 bytes");
  job["metadata"]["name"] = "9lives";
  EXPECT_EQ(
      Message(Admit(job)),
      "TrainingJob.psflow.io \"9lives\" is invalid: metadata.name: Invalid value: \"9lives\": "
      "metadata.name in body should match '^[a-z]([-a-z0-9]*[a-z0-9])?$'");
}

TEST(TrainingJobCrd, StatusIsTyped) {
  json job = Example("mnist-mlp");
  job["status"] = json::parse(R"({
    "state": "Running",
    "conditions": [
      {"type": "Created", "status": "True", "reason": "TrainingJobCreated",
       "lastTransitionTime": "2024-05-01T10:00:00Z"},
      {"type": "Running", "status": "True", "lastUpdateTime": "2024-05-01T10:01:00.5+02:00"}
    ],
    "replicaStatuses": {"PS": {"active": 1, "ready": 1},
                        "Worker": {"active": 2, "ready": 1, "completedIndexes": "0,2-3"}},
    "workers": "1/2",
    "workerSelector": "psflow.io/job-name=mnist-mlp,psflow.io/replica-type=worker",
    "startTime": "2024-05-01T10:00:00Z",
    "observedGeneration": 3,
    "restartCount": 0,
    "throughput": {"wordsPerSecond": 0, "examplesPerSecond": 5234.5}
  })");
  EXPECT_TRUE(Admit(job).ok()) << Admit(job);

  job["status"]["state"] = "Done";
  job["status"]["conditions"][1]["type"] = "Created";
  job["status"]["conditions"][1]["lastUpdateTime"] = "yesterday";
  job["status"]["throughput"]["examplesPerSecond"] = -1.5;
  job["status"]["workers"] = "one of two";
  job["status"]["replicaStatuses"]["Worker"]["active"] = -2;
  EXPECT_EQ(
      Message(Admit(job)),
      std::string(kPrefix) +
          "[status.conditions[1].lastUpdateTime: Invalid value: \"yesterday\": "
          "status.conditions[1].lastUpdateTime in body must be of type date-time: "
          "\"yesterday\", "
          "status.replicaStatuses.Worker.active: Invalid value: -2: "
          "status.replicaStatuses.Worker.active in body should be greater than or equal to 0, "
          "status.state: Unsupported value: \"Done\": supported values: \"Created\", "
          "\"Running\", \"Restarting\", \"Succeeded\", \"Failed\", \"Suspended\", "
          "status.throughput.examplesPerSecond: Invalid value: -1.5: "
          "status.throughput.examplesPerSecond in body should be greater than or equal to 0, "
          "status.workers: Invalid value: \"one of two\": status.workers in body should match "
          "'^[0-9]+/[0-9]+$', "
          ".status.replicaStatuses.Worker.active: Invalid value: -2: should be a non-negative "
          "integer, "
          "status.conditions[1]: Duplicate value: map[string]interface {}{\"type\":\"Created\"}]");
}

TEST(TrainingJobCrd, PruningDropsUnknownFieldsButKeepsTheTemplate) {
  json job = Example("cifar10");
  const json templ = job["spec"]["replicaSpecs"]["Worker"]["template"];
  job["metadata"]["annotations"] = {{"team", "ml"}};
  job["spec"]["priority"] = "high";
  job["spec"]["replicaSpecs"]["worker"] = job["spec"]["replicaSpecs"]["Worker"];  // lower case
  job["spec"]["runPolicy"]["retries"] = 3;
  job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["madeUpField"] = {{"a", 1}};
  job["status"] = {{"state", "Running"}, {"phase", "Running"}};
  json pruned = job;
  std::vector<std::string> unknown;
  Crd().Prune(pruned, &unknown);
  EXPECT_THAT(unknown, ElementsAre("spec.replicaSpecs.worker", "spec.runPolicy.retries",
                                   "spec.priority", "status.phase"));
  EXPECT_FALSE(pruned["spec"].contains("priority"));
  EXPECT_FALSE(pruned["spec"]["replicaSpecs"].contains("worker"));
  EXPECT_FALSE(pruned["spec"]["runPolicy"].contains("retries"));
  EXPECT_EQ(pruned["status"], json({{"state", "Running"}}));
  // Everything under template stays, known to the schema or not.
  json want_template = templ;
  want_template["spec"]["madeUpField"] = {{"a", 1}};
  EXPECT_EQ(pruned["spec"]["replicaSpecs"]["Worker"]["template"], want_template);
  EXPECT_EQ(pruned["metadata"], job["metadata"]);
  EXPECT_EQ(pruned["apiVersion"], job["apiVersion"]);
  EXPECT_EQ(pruned["kind"], job["kind"]);
}

TEST(TrainingJobCrd, DefaultsReplicasSoTheScaleSubresourceAlwaysFindsThem) {
  json job = Example("mnist-mlp");
  job["spec"]["replicaSpecs"]["Worker"].erase("replicas");
  job["spec"]["replicaSpecs"]["PS"]["replicas"] = nullptr;  // null: pruned, then defaulted
  Crd().Prune(job);
  Crd().Default(job);
  EXPECT_EQ(job["spec"]["replicaSpecs"]["Worker"]["replicas"], json(1));
  EXPECT_EQ(job["spec"]["replicaSpecs"]["PS"]["replicas"], json(1));
  EXPECT_FALSE(job["spec"]["replicaSpecs"].contains("Chief"));  // absent types stay absent
  EXPECT_TRUE(Crd().Validate(job).ok());
}

TEST(TrainingJobCrd, NullWithoutDefaultIsPruned) {
  json job = Example("mnist-mlp");
  job["spec"]["runPolicy"]["cleanPodPolicy"] = nullptr;
  Crd().Prune(job);
  EXPECT_FALSE(job["spec"]["runPolicy"].contains("cleanPodPolicy"));
}

TEST(TrainingJobCrd, NamesSubresourcesAndPrinterColumns) {
  auto crd = LoadYamlFile(kCrdPath);
  ASSERT_TRUE(crd.ok()) << crd.status();
  const json& spec = (*crd)["spec"];
  EXPECT_EQ((*crd)["metadata"]["name"], "trainingjobs.psflow.io");
  EXPECT_EQ(spec["group"], "psflow.io");
  EXPECT_EQ(spec["scope"], "Namespaced");
  EXPECT_EQ(spec["names"]["kind"], "TrainingJob");
  EXPECT_EQ(spec["names"]["plural"], "trainingjobs");
  EXPECT_EQ(spec["names"]["singular"], "trainingjob");
  EXPECT_EQ(spec["names"]["shortNames"], json({"tj"}));
  EXPECT_EQ(spec["names"]["categories"], json({"psflow"}));
  ASSERT_EQ(spec["versions"].size(), 1u);
  const json& v = spec["versions"][0];
  EXPECT_EQ(v["name"], "v1alpha1");
  EXPECT_EQ(v["served"], true);
  EXPECT_EQ(v["storage"], true);
  EXPECT_EQ(v["subresources"]["status"], json::object());
  EXPECT_EQ(v["subresources"]["scale"],
            json({{"specReplicasPath", ".spec.replicaSpecs.Worker.replicas"},
                  {"statusReplicasPath", ".status.replicaStatuses.Worker.active"},
                  {"labelSelectorPath", ".status.workerSelector"}}));
  std::vector<std::vector<std::string>> columns;
  for (const auto& c : v["additionalPrinterColumns"]) {
    columns.push_back({c["name"], c["type"], c["jsonPath"]});
  }
  EXPECT_THAT(
      columns,
      ElementsAre(ElementsAre("State", "string", ".status.state"),
                  ElementsAre("Workers", "string", ".status.workers"),
                  ElementsAre("PS", "integer", ".spec.replicaSpecs.PS.replicas"),
                  ElementsAre("Words/s", "number", ".status.throughput.wordsPerSecond"),
                  ElementsAre("Examples/s", "number", ".status.throughput.examplesPerSecond"),
                  ElementsAre("Age", "date", ".metadata.creationTimestamp")));
  EXPECT_EQ(&Crd().version_definition(), &Crd().definition()["spec"]["versions"][0]);
  EXPECT_EQ(Crd().plural(), "trainingjobs");
}

// The schema node a ".a.b.c" path reaches through properties, or null.
const Schema* SchemaAt(const std::string& path) {
  const Schema* s = &Crd().schema();
  size_t start = 1;
  while (s != nullptr && start <= path.size()) {
    const size_t end = std::min(path.find('.', start), path.size());
    auto it = s->properties.find(path.substr(start, end - start));
    s = it == s->properties.end() ? nullptr : it->second.get();
    start = end + 1;
  }
  return s;
}

TEST(TrainingJobCrd, SubresourceAndColumnPathsExistInTheSchemaWithTheirTypes) {
  const json& v = Crd().version_definition();
  const json& scale = v["subresources"]["scale"];
  ASSERT_NE(SchemaAt(scale["specReplicasPath"]), nullptr);
  EXPECT_EQ(SchemaAt(scale["specReplicasPath"])->type, "integer");
  ASSERT_NE(SchemaAt(scale["statusReplicasPath"]), nullptr);
  EXPECT_EQ(SchemaAt(scale["statusReplicasPath"])->type, "integer");
  ASSERT_NE(SchemaAt(scale["labelSelectorPath"]), nullptr);
  EXPECT_EQ(SchemaAt(scale["labelSelectorPath"])->type, "string");
  for (const auto& c : v["additionalPrinterColumns"]) {
    const std::string path = c["jsonPath"];
    if (path == ".metadata.creationTimestamp") continue;  // ObjectMeta, not in the schema
    SCOPED_TRACE(path);
    const Schema* s = SchemaAt(path);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->type, c["type"]);
  }
}

// Why template is not x-kubernetes-embedded-resource: that marks a whole object (TypeMeta and
// ObjectMeta), so apiVersion and kind become required, which a PodTemplateSpec does not have.
TEST(TrainingJobCrd, EmbeddedResourceWouldRejectEveryPodTemplate) {
  auto crd = LoadYamlFile(kCrdPath);
  ASSERT_TRUE(crd.ok());
  (*crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["replicaSpecs"]["properties"]["PS"]["properties"]["template"]
        ["x-kubernetes-embedded-resource"] = true;
  auto embedded = CrdSchema::FromDefinition(*crd, "v1alpha1");
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  EXPECT_TRUE(embedded->CheckStructural().ok());
  json job = Example("mnist-mlp");
  embedded->Prune(job);
  EXPECT_EQ(Message(embedded->Validate(job)),
            std::string(kPrefix) +
                "[spec.replicaSpecs.PS.template.apiVersion: Required value, "
                "spec.replicaSpecs.PS.template.kind: Required value]");
}

json MinimalCrd(const json& schema) {
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "widgets.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"names", {{"kind", "Widget"}, {"plural", "widgets"}}},
            {"versions", {{{"name", "v1"}, {"schema", {{"openAPIV3Schema", schema}}}}}}}}};
}

TEST(CrdSchema, CheckStructuralReportsEveryViolation) {
  const json schema = json::parse(R"({
    "type": "object",
    "additionalProperties": {"type": "string"},
    "properties": {
      "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
      "spec": {
        "properties": {
          "port": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
          "mode": {"type": "string", "anyOf": [{"type": "string", "enum": ["a"]}]},
          "list": {"type": "array"},
          "size": {"type": "integer", "default": -1, "minimum": 0}
        },
        "allOf": [{"properties": {"ghost": {"maxLength": 3}}}]
      }
    }
  })");
  auto crd = CrdSchema::FromDefinition(MinimalCrd(schema), "v1");
  ASSERT_TRUE(crd.ok()) << crd.status();
  const std::string root = "spec.versions[0].schema.openAPIV3Schema";
  EXPECT_EQ(
      Message(crd->CheckStructural()),
      "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: [" + root +
          ".additionalProperties: Forbidden: additionalProperties and properties are mutual "
          "exclusive, " +
          root + ".additionalProperties: Forbidden: must not be used at the root, " + root +
          ".properties[metadata]: Forbidden: must not specify anything other than name and "
          "generateName, but metadata is implicitly specified, " +
          root + ".properties[spec].properties[ghost]: Required value: because it is defined in " +
          root + ".properties[spec].allOf[0].properties[ghost], " + root +
          ".properties[spec].properties[list].items: Required value: must be specified, " + root +
          ".properties[spec].properties[mode].anyOf[0].type: Forbidden: must be empty to be "
          "structural, " +
          root + ".properties[spec].properties[size].default: Invalid value: -1: " + root +
          ".properties[spec].properties[size].default in body should be greater than or equal to "
          "0, " +
          root +
          ".properties[spec].type: Required value: must not be empty for specified object fields]");
}

TEST(CrdSchema, LoadRefusesWhatItCannotCheck) {
  const json cel =
      json::parse(R"({"type": "object", "x-kubernetes-validations": [{"rule": "self.a > 0"}]})");
  EXPECT_EQ(CrdSchema::FromDefinition(MinimalCrd(cel), "v1").status().code(),
            absl::StatusCode::kUnimplemented);
  const json uuid = json::parse(
      R"({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}})");
  EXPECT_EQ(CrdSchema::FromDefinition(MinimalCrd(uuid), "v1").status().code(),
            absl::StatusCode::kUnimplemented);
  const json typo = json::parse(R"({"type": "object", "maximun": 3})");
  EXPECT_EQ(CrdSchema::FromDefinition(MinimalCrd(typo), "v1").status().message(),
            "spec.versions[0].schema.openAPIV3Schema: unknown field \"maximun\"");
  EXPECT_EQ(CrdSchema::FromDefinition(MinimalCrd(typo), "v2").status().message(),
            "the CRD has no version v2");
  EXPECT_EQ(CrdSchema::Load("/nonexistent.yaml", "v1").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CrdSchema, AdditionalPropertiesNullableAndIntOrString) {
  const json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "spec": {
        "type": "object",
        "properties": {
          "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
          "closed": {"type": "object", "additionalProperties": false},
          "note": {"type": "string", "nullable": true},
          "port": {"x-kubernetes-int-or-string": true},
          "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "minItems": 1,
                   "x-kubernetes-list-type": "set"}
        }
      }
    }
  })");
  auto crd = CrdSchema::FromDefinition(MinimalCrd(schema), "v1");
  ASSERT_TRUE(crd.ok()) << crd.status();
  EXPECT_TRUE(crd->CheckStructural().ok()) << crd->CheckStructural();
  json widget = json::parse(R"({"apiVersion": "example.com/v1", "kind": "Widget",
    "metadata": {"name": "w"},
    "spec": {"labels": {"a": "xyz"}, "note": null, "port": "http", "tags": ["a", "b"]}})");
  crd->Prune(widget);
  EXPECT_TRUE(widget["spec"]["note"].is_null());  // nullable: kept
  EXPECT_TRUE(crd->Validate(widget).ok()) << crd->Validate(widget);
  widget["spec"] = json::parse(
      R"({"labels": {"a": "long"}, "closed": {"x": 1}, "port": true, "tags": ["a", "a", "b"]})");
  EXPECT_EQ(Message(crd->Validate(widget)),
            "Widget.example.com \"w\" is invalid: ["
            "spec.closed: Invalid value: \"x\": spec.closed.x in body is a forbidden property, "
            "spec.labels.a: Too long: must have at most 3 bytes, "
            "spec.port: Invalid value: \"boolean\": spec.port in body must be of type "
            "integer,string: \"boolean\", "
            "spec.tags: Too many: 3: must have at most 2 items, "
            "spec.tags[1]: Duplicate value: \"a\"]");
}

TEST(CrdSchema, ValidateAndPruneRunConcurrently) {
  const json valid = Example("ptb-small");
  json invalid = valid;
  invalid["spec"]["replicaSpecs"]["PS"]["replicas"] = -3;
  invalid["spec"]["bogus"] = true;
  const std::string want = Message(Admit(invalid));
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (!Admit(valid).ok() || Message(Admit(invalid)) != want) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_THAT(failures, ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace psflow::kubetest
