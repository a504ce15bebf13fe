#include "operator/local/validate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace psflow::local {
namespace {

using ::testing::HasSubstr;

const std::string kModels = absl::StrCat(PSFLOW_SOURCE_DIR, "/deploy/models/");

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(testing::TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(Validate, AModelFileGetsItsLayersShapesAndParameters) {
  const std::string path = kModels + "mnist_mlp.yaml";
  const absl::StatusOr<std::string> report = Validate(path);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(*report,
            absl::StrCat(path,
                         ": model \"mnist_mlp\", input 784 float32, 10 classes, data mnist\n"
                         "  layer 0 (dense \"dense0\")         784 -> 100, 78500 parameters\n"
                         "  layer 1 (sigmoid \"activation1\")  100 -> 100\n"
                         "  layer 2 (dense \"dense2\")         100 -> 10, 1010 parameters\n",
                         path,
                         ": valid: 3 layers, 79510 parameters (310.6 KiB as float32); sgd at "
                         "learning rate 0.001, batches of 100, 20 epochs\n"));
}

TEST(Validate, AManifestChecksTheModelFilesItNames) {
  const std::string bad = Write("bad_model.yaml",
                                "name: m\ninput: {shape: [784]}\nclasses: 10\nlayers:\n"
                                "  - {type: dense, units: 7}\ndata: {format: mnist}\n");
  const auto manifest = [](const std::string& model) {
    return absl::StrCat(
        "apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: j}\nspec:\n"
        "  replicaSpecs:\n    Worker:\n      replicas: 1\n      template:\n        spec:\n"
        "          containers:\n            - name: psflow\n              image: w\n"
        "              args: [\"--model_file=",
        model, "\", \"--model_file\", \"/in/the/pod/model.yaml\"]\n");
  };
  const absl::StatusOr<std::string> good =
      Validate(Write("good.yaml", manifest(kModels + "mnist_cnn.yaml")));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_THAT(*good, HasSubstr("good.yaml: valid TrainingJob \"j\"\n"));
  EXPECT_THAT(*good, HasSubstr("mnist_cnn.yaml: valid: 10 layers, 3274634 parameters"));
  EXPECT_THAT(*good, HasSubstr("--model_file=/in/the/pod/model.yaml not checked: it is not on "
                               "this machine"));

  const absl::StatusOr<std::string> wrong = Validate(Write("wrong.yaml", manifest(bad)));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.status().message()),
              HasSubstr("wrong.yaml: --model_file: " + bad +
                        ": the last layer, layer 0 (dense \"dense0\"), produces 7 values"));
}

// A file without apiVersion and kind that has a model file's keys is told about as a model
// file, even with `layers` mistyped; one with neither is read as a manifest.
TEST(Validate, AModelFileWithAMistypedKeyIsToldAsAModelFile) {
  const absl::StatusOr<std::string> typo =
      Validate(Write("typo.yaml",
                     "name: m\ninput: {shape: [784]}\nclasses: 10\nlayer:\n"
                     "  - {type: dense, units: 10}\ndata: {format: mnist}\n"));
  EXPECT_EQ(typo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(typo.status().message(), HasSubstr("typo.yaml:4: model file: unknown option "
                                                 "\"layer\" (known: name, input, classes, layers"));
  const absl::StatusOr<std::string> manifest =
      Validate(Write("no_kind.yaml", "metadata: {name: j}\nspec: {}\n"));
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(manifest.status().message(), ::testing::Not(HasSubstr("model file")));
}

TEST(Validate, AMissingFileIsNotFound) {
  EXPECT_EQ(Validate("/nonexistent.yaml").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psflow::local
