// A model of the user's own, end to end, as docs/user-guide.md walks through it: a CSV table made
// by scripts/make_tabular_csv.py, the model file deploy/models/tabular/model.yaml, training
// alone and under `psflow run` (1 ps, 2 workers) with --export_dir, and the exported
// model.safetensors read back by the format's reader, evaluated again by --eval_only and, where
// Debian's python3-numpy is installed, by numpy from the file alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/prometheus_text.h"
#include "core/read_file.h"
#include "core/safetensors.h"
#include "tests/test_util.h"

namespace psflow::testing {
namespace {

using ::testing::HasSubstr;

// What the example reaches: the classes' clouds overlap, so no model is perfect (a classifier
// that knows the true centres gets 0.924 of this test set).
constexpr double kStatedAccuracy = 0.88;

class OwnModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/own_model_", getpid());
    std::filesystem::remove_all(dir_);
    const CommandResult r =
        RunCommand({"python3", SourceDir() + "/scripts/make_tabular_csv.py", dir_ + "/data"},
                   Environment({}), std::chrono::seconds(60));
    ASSERT_TRUE(r.status.ok()) << r.output;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string ModelFile() const { return SourceDir() + "/deploy/models/tabular/model.yaml"; }

  // The accuracy in the one line of `output` that has `needle` and test_accuracy.
  static double Accuracy(const std::string& output, const std::string& needle) {
    const std::vector<std::string> lines = LinesWith(output, needle);
    for (const std::string& l : lines) {
      if (l.find("test_accuracy=") != std::string::npos) return Field(l, "test_accuracy");
    }
    ADD_FAILURE() << "no \"" << needle << "\" line with test_accuracy in:\n" << output;
    return NAN;
  }

  // --eval_only of the export in `export_dir`: the same accuracy as the training's own
  // evaluation of the same parameters, to the digit.
  void ExpectEvalOnlyAgrees(const std::string& export_dir, double trained_accuracy) {
    const CommandResult r =
        RunCommand({Binary("psflow-worker"), "--model_file=" + export_dir + "/model.yaml",
                    "--data_path=" + dir_ + "/data",
                    "--weights=" + export_dir + "/model.safetensors", "--eval_only"},
                   Environment({}, {"TF_CONFIG"}), std::chrono::seconds(120));
    ASSERT_TRUE(r.status.ok()) << r.output;
    EXPECT_EQ(Accuracy(r.output, "eval_only weights="), trained_accuracy) << r.output;
    EXPECT_THAT(r.output, HasSubstr("examples=1000 "));
  }

  std::string dir_;
};

TEST_F(OwnModelTest, TrainsAloneExportsAndEvaluatesTheExportAgain) {
  const std::string out = dir_ + "/export";
  const CommandResult r =
      RunCommand({Binary("psflow-worker"), "--model_file=" + ModelFile(),
                  "--data_path=" + dir_ + "/data", "--export_dir=" + out, "--log_every_steps=0"},
                 Environment({}, {"TF_CONFIG"}), std::chrono::seconds(180));
  ASSERT_TRUE(r.status.ok()) << r.output;
  const double accuracy = Accuracy(r.output, "worker 0 done:");
  EXPECT_GE(accuracy, kStatedAccuracy) << r.output;
  EXPECT_THAT(r.output, HasSubstr("loaded 6000 training and 1000 test examples (csv)"));

  // The file, by the format's own reader: the model's five parameters, TensorFlow's layout.
  const absl::StatusOr<SafetensorsFile> f = ReadSafetensors(out + "/model.safetensors");
  ASSERT_TRUE(f.ok()) << f.status();
  std::vector<std::pair<std::string, std::vector<int64_t>>> got;
  for (const SafetensorsTensor& t : f->tensors) got.emplace_back(t.name, t.shape);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"hidden1/bias", {32}},       {"hidden1/kernel", {8, 32}}, {"hidden2/bias", {16}},
      {"hidden2/kernel", {32, 16}}, {"logits/bias", {3}},        {"logits/kernel", {16, 3}}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(f->metadata.at("psflow.model"), "tabular_mlp");
  EXPECT_EQ(f->metadata.at("psflow.global_step"), "600");  // 5 epochs of 6000 / 50
  EXPECT_EQ(ReadFile(out + "/model.yaml").value(), ReadFile(ModelFile()).value());

  ExpectEvalOnlyAgrees(out, accuracy);

  // numpy, from the file alone: the MLP's forward pass over test.csv gives the same accuracy.
  const CommandResult numpy_present = RunCommand({"/usr/bin/python3", "-c", "import numpy"},
                                                 Environment({}), std::chrono::seconds(60));
  if (!numpy_present.status.ok()) {
    GTEST_SKIP() << "Debian's python3-numpy is not installed: the export was not loaded by numpy";
  }
  const std::string script = R"(
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
w = {}
for name, t in header.items():
    if name == "__metadata__":
        continue
    b, e = t["data_offsets"]
    assert t["dtype"] == "F32"
    w[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(t["shape"])
table = np.loadtxt(sys.argv[2], delimiter=",", skiprows=1, dtype=np.float32)
x, y = table[:, :8], table[:, 8].astype(int)
h = np.maximum(x @ w["hidden1/kernel"] + w["hidden1/bias"], 0)
h = np.maximum(h @ w["hidden2/kernel"] + w["hidden2/bias"], 0)
logits = h @ w["logits/kernel"] + w["logits/bias"]
print("numpy_accuracy=%.4f" % np.mean(np.argmax(logits, axis=1) == y))
)";
  const CommandResult np = RunCommand(
      {"/usr/bin/python3", "-c", script, out + "/model.safetensors", dir_ + "/data/test.csv"},
      Environment({}), std::chrono::seconds(60));
  ASSERT_TRUE(np.status.ok()) << np.output;
  EXPECT_NEAR(Field(LinesWith(np.output, "numpy_accuracy=").at(0), "numpy_accuracy"), accuracy,
              1.5e-3)  // a tie in the last bit of a logit may fall the other way in numpy
      << np.output;
}

// The model inline in the manifest (spec.modelFile), as on Kubernetes: `psflow run` writes it to
// the run folder and gives the workers --model_file.
// A monitoring system scraping the worker (here a loop with Prometheus's User-Agent) sees the
// test accuracy of the trained model: the worker waits for its next scrape after setting it
// (--final_scrape_wait_s), so the value is not lost with the process. Before training it is
// absent, not 0.
TEST_F(OwnModelTest, AScrapingPrometheusSeesTheFinalAccuracyBeforeTheWorkerExits) {
  const ScrapedRun run = RunScrapedByPrometheus(
      {Binary("psflow-worker"), "--model_file=" + ModelFile(), "--data_path=" + dir_ + "/data",
       // 4 s of training: time for the scrapes during it that make the worker wait at its end.
       "--train_steps=1000000", "--train_seconds=4", "--log_every_steps=0", "--metrics_port=0",
       "--final_scrape_wait_s=60"},
      Environment({}, {"TF_CONFIG", "PSFLOW_METRICS_PORT"}), std::chrono::seconds(180));
  const std::string& output = run.output;
  const std::vector<std::string>& scrapes = run.scrapes;
  ASSERT_TRUE(run.exit.has_value() && run.exit->ok()) << output;
  ASSERT_FALSE(scrapes.empty()) << output;
  const std::string series = R"(psflow_worker_test_accuracy_ratio{job="local",)";
  EXPECT_THAT(scrapes.front(), ::testing::Not(HasSubstr(series)));
  const std::optional<double> scraped =
      SumSamples(scrapes.back(), "psflow_worker_test_accuracy_ratio");
  ASSERT_TRUE(scraped.has_value()) << scrapes.back();
  EXPECT_NEAR(*scraped, Accuracy(output, "worker 0 done:"), 5e-5) << output;
}

TEST_F(OwnModelTest, TrainsInlineUnderPsflowRunWithAPsAndTwoWorkers) {
  const std::string out = dir_ + "/export";
  const std::string job =
      WriteJob(dir_ + "/job.yaml", "tabular", 2,
               {"--data_path=" + dir_ + "/data", "--export_dir=" + out, "--log_every_steps=0"});
  {  // The ps checkpoints, for `psflow export` below.
    std::string text = ReadFile(job).value();
    const std::string ps = "containers: [{name: psflow, command: [psflow-ps]}]";
    text.replace(text.find(ps), ps.size(),
                 "containers: [{name: psflow, command: [psflow-ps], args: [--checkpoint_dir=" +
                     dir_ + "/checkpoints]}]");
    std::ofstream(job) << text;
  }
  {
    std::ofstream append(job, std::ios::app);
    append << "  modelFile: |\n";
    std::istringstream model(ReadFile(ModelFile()).value());
    for (std::string line; std::getline(model, line);) append << "    " << line << "\n";
  }
  const CommandResult v =
      RunCommand({Binary("psflow"), "validate", job}, Environment({}), std::chrono::seconds(60));
  ASSERT_TRUE(v.status.ok()) << v.output;
  EXPECT_THAT(v.output, HasSubstr("spec.modelFile: valid: 5 layers, 867 parameters"));
  const CommandResult r = RunCommand(
      {Binary("psflow"), "run", "--progress=never", "--verbose", "--run_dir=" + dir_ + "/run", job},
      Environment({}), std::chrono::seconds(240));
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_EQ(r.status.code, 0) << r.output;
  const double accuracy = Accuracy(r.output, "[worker-0] ");
  EXPECT_GE(accuracy, kStatedAccuracy) << r.output;
  // Only the chief (worker 0) exports, once worker 1 has finished too: the job's final model, all
  // 600 updates (2 workers, 5 epochs of 3000 examples in batches of 50).
  EXPECT_EQ(LinesWith(r.output, "exported the trained model").size(), 1u) << r.output;
  const absl::StatusOr<SafetensorsFile> exported = ReadSafetensors(out + "/model.safetensors");
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->metadata.at("psflow.global_step"), "600") << r.output;
  ExpectEvalOnlyAgrees(out, accuracy);

  // `psflow export`: the same model from the ps's last checkpoint (written as it stopped), as
  // the chief writes it; weights of another model are refused.
  const std::string again = dir_ + "/from_checkpoints";
  const CommandResult e = RunCommand(
      {Binary("psflow"), "export", "--model_file=" + ModelFile(), dir_ + "/checkpoints", again},
      Environment({}), std::chrono::seconds(60));
  ASSERT_TRUE(e.status.ok()) << e.output;
  EXPECT_THAT(e.output, HasSubstr("exported tabular_mlp at global step "));
  EXPECT_THAT(e.output, HasSubstr(" (6 tensors from 1 ps tasks) to " + again +
                                  "/model.safetensors and model.yaml"));
  // The same values as the chief's export: both are the ps's values after the last update.
  const absl::StatusOr<SafetensorsFile> from_checkpoints =
      ReadSafetensors(again + "/model.safetensors");
  ASSERT_TRUE(from_checkpoints.ok()) << from_checkpoints.status();
  ASSERT_EQ(from_checkpoints->tensors.size(), exported->tensors.size());
  for (size_t i = 0; i < exported->tensors.size(); ++i) {
    EXPECT_EQ(from_checkpoints->tensors[i].name, exported->tensors[i].name);
    EXPECT_EQ(from_checkpoints->tensors[i].values, exported->tensors[i].values)
        << exported->tensors[i].name;
  }
  const CommandResult eval = RunCommand(
      {Binary("psflow-worker"), "--model_file=" + again + "/model.yaml",
       "--data_path=" + dir_ + "/data", "--weights=" + again + "/model.safetensors", "--eval_only"},
      Environment({}, {"TF_CONFIG"}), std::chrono::seconds(120));
  ASSERT_TRUE(eval.status.ok()) << eval.output;
  EXPECT_GE(Accuracy(eval.output, "eval_only weights="), kStatedAccuracy) << eval.output;
  const CommandResult wrong = RunCommand(
      {Binary("psflow"), "export", "--model_file=" + SourceDir() + "/deploy/models/mnist_mlp.yaml",
       dir_ + "/checkpoints", dir_ + "/wrong"},
      Environment({}), std::chrono::seconds(60));
  EXPECT_EQ(wrong.status.code, 2) << wrong.output;
  EXPECT_THAT(wrong.output,
              HasSubstr("has no tensor \"dense0/kernel\" [784, 100] the model needs"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/wrong"));
}

}  // namespace
}  // namespace psflow::testing
