// The observability files checked without running a job: promtool on the Prometheus configs and
// the alert rules (and the rules' unit tests), the Grafana dashboards' structure, docs/metrics.md
// against the sources, and `psflow run --prometheus_targets` refusing a path it cannot write.
// observe_e2e_test runs all of it against live processes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/observe/grafana_dashboard.h"
#include "tests/observe/metrics_reference.h"
#include "tests/observe/prometheus_server.h"
#include "tests/test_util.h"

namespace psflow::observe {
namespace {

namespace fs = std::filesystem;
using testing::Environment;
using ::testing::HasSubstr;
using testing::RunCommand;
using testing::SourceDir;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string PrometheusDir() { return SourceDir() + "/deploy/prometheus"; }

testing::CommandResult Promtool(const std::vector<std::string>& args,
                                const std::string& cwd = PrometheusDir()) {
  std::string command = "cd '" + cwd + "' && '" + PromtoolBinary() + "'";
  for (const std::string& a : args) absl::StrAppend(&command, " '", a, "'");
  return RunCommand({"sh", "-c", command}, Environment({}), std::chrono::seconds(60));
}

// scripts/setup.sh installs promtool: its absence is a broken setup, not a reason to skip.
#define REQUIRE_PROMTOOL()                                                        \
  if (PromtoolBinary().empty()) {                                                 \
    GTEST_FAIL() << "promtool not found: install Debian's prometheus (setup.sh)"; \
  }

TEST(PrometheusConfig, LocalConfigPassesPromtool) {
  REQUIRE_PROMTOOL();
  const auto r = Promtool({"check", "config", "prometheus-local.yml"});
  EXPECT_TRUE(r.status.ok()) << r.output;
  EXPECT_THAT(r.output, HasSubstr("1 rule files found"));
}

// Debian's Prometheus is built without Kubernetes service discovery, so its promtool rejects
// `kubernetes_sd_configs`. Then the file is checked with static targets in its place: the
// relabel rules, rule files and everything else are still validated.
TEST(PrometheusConfig, KubernetesScrapeConfigPassesPromtool) {
  REQUIRE_PROMTOOL();
  auto r = Promtool({"check", "config", "scrape-kubernetes.yml"});
  if (!r.status.ok() && absl::StrContains(r.output, "kubernetes_sd_configs not found")) {
    const std::string text = Read(PrometheusDir() + "/scrape-kubernetes.yml");
    ASSERT_THAT(text, HasSubstr("kubernetes_sd_configs:\n      - role: pod\n"));
    const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("k8s_sd_", getpid());
    fs::create_directories(dir);
    std::ofstream(dir / "scrape-kubernetes.yml")
        << absl::StrReplaceAll(text, {{"kubernetes_sd_configs:\n      - role: pod\n",
                                       "static_configs:\n      - targets: []\n"}});
    fs::copy_file(PrometheusDir() + "/psflow-alerts.yml", dir / "psflow-alerts.yml");
    r = Promtool({"check", "config", "scrape-kubernetes.yml"}, dir.string());
    fs::remove_all(dir);
  }
  EXPECT_TRUE(r.status.ok()) << r.output;
  EXPECT_THAT(r.output, HasSubstr("1 rule files found"));
}

TEST(PrometheusRules, AlertRulesPassPromtool) {
  REQUIRE_PROMTOOL();
  const auto r = Promtool({"check", "rules", "psflow-alerts.yml"});
  EXPECT_TRUE(r.status.ok()) << r.output;
  EXPECT_THAT(r.output, HasSubstr("SUCCESS: 4 rules found"));
}

// psflow-alerts.test.yml: a stalled job alerts after its `for`, a finished one does not; a ps
// target down alerts and clears; a vanished ps alerts, a job that never had one does not.
TEST(PrometheusRules, AlertUnitTestsPass) {
  REQUIRE_PROMTOOL();
  const auto r = Promtool({"test", "rules", "psflow-alerts.test.yml"});
  EXPECT_TRUE(r.status.ok()) << r.output;
  EXPECT_THAT(r.output, HasSubstr("SUCCESS"));
}

class Dashboards : public ::testing::TestWithParam<std::string> {
 protected:
  nlohmann::json Load() {
    auto d = LoadDashboard(SourceDir() + "/deploy/grafana/" + GetParam());
    EXPECT_TRUE(d.ok()) << d.status();
    return d.value_or(nlohmann::json::object());
  }
};

TEST_P(Dashboards, DatasourceIsAVariableAndVariablesMatchAllWhenLabelsAreAbsent) {
  const nlohmann::json d = Load();
  EXPECT_GE(d.value("schemaVersion", 0), 36);
  EXPECT_EQ(d.value("uid", ""), GetParam().substr(0, GetParam().size() - 5));
  std::map<std::string, nlohmann::json> variables;
  for (const nlohmann::json& v : d["templating"]["list"]) variables[v.value("name", "")] = v;
  ASSERT_TRUE(variables.count("datasource"));
  EXPECT_EQ(variables["datasource"]["type"], "datasource");
  EXPECT_EQ(variables["datasource"]["query"], "prometheus");
  for (const char* name : {"namespace", "job"}) {
    ASSERT_TRUE(variables.count(name)) << name;
    const nlohmann::json& v = variables[name];
    EXPECT_EQ(v["type"], "query") << name;
    EXPECT_EQ(v["includeAll"], true) << name;
    // Local runs have no `namespace` label: "All" must then match the empty value.
    EXPECT_EQ(v["allValue"], ".*") << name;
    EXPECT_EQ(v["datasource"]["uid"], "${datasource}") << name;
  }
  // No data source is named anywhere but through the variable.
  std::function<void(const nlohmann::json&, const std::string&)> walk =
      [&](const nlohmann::json& node, const std::string& where) {
        if (node.is_object()) {
          for (const auto& [key, value] : node.items()) {
            if (key == "datasource" && value.is_object() && value.value("type", "") != "grafana") {
              EXPECT_EQ(value.value("uid", ""), "${datasource}") << where;
              EXPECT_EQ(value.value("type", ""), "prometheus") << where;
            }
            walk(value, where + "/" + key);
          }
        } else if (node.is_array()) {
          for (size_t i = 0; i < node.size(); ++i) walk(node[i], absl::StrCat(where, "/", i));
        }
      };
  walk(d, GetParam());
}

TEST_P(Dashboards, EveryPanelHasAUnitUniqueIdAndQueriesFilteredByTheVariables) {
  const nlohmann::json d = Load();
  std::set<int> ids;
  for (const nlohmann::json& panel : d["panels"]) {
    EXPECT_TRUE(ids.insert(panel.value("id", -1)).second) << "repeated id " << panel["id"];
    EXPECT_TRUE(panel.contains("gridPos")) << panel["title"];
    if (panel["type"] == "row") continue;
    EXPECT_THAT(std::string(panel["type"]), ::testing::AnyOf("timeseries", "stat"));
    EXPECT_FALSE(panel["fieldConfig"]["defaults"].value("unit", "").empty())
        << panel["title"] << ": no unit";
  }
  auto queries = PanelQueries(d, GetParam());
  ASSERT_TRUE(queries.ok()) << queries.status();
  ASSERT_GE(queries->size(), 10u);
  for (const PanelQuery& q : *queries) {
    const std::vector<Selector> selectors = SelectorsIn(q.expr);
    EXPECT_FALSE(selectors.empty()) << q.Describe() << ": " << q.expr;
    for (const Selector& s : selectors) {
      EXPECT_THAT(s.matchers, HasSubstr("namespace=~\"$namespace\"")) << q.Describe();
      EXPECT_THAT(s.matchers, HasSubstr("job=~\"$job\"")) << q.Describe();
    }
  }
}

// Every metric a dashboard reads is one docs/metrics.md lists (the e2e test proves it exists).
TEST_P(Dashboards, ReadOnlyDocumentedMetrics) {
  auto documented = ParseMetricsTable(Read(SourceDir() + "/docs/metrics.md"));
  ASSERT_TRUE(documented.ok()) << documented.status();
  auto queries = PanelQueries(Load(), GetParam());
  ASSERT_TRUE(queries.ok()) << queries.status();
  for (const PanelQuery& q : *queries) {
    for (const Selector& s : SelectorsIn(q.expr)) {
      if (s.metric == "up") continue;
      std::string family = s.metric;
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (absl::EndsWith(family, suffix) && !documented->count(family)) {
          family.resize(family.size() - strlen(suffix));
          EXPECT_EQ((*documented)[family].type, "histogram") << q.Describe() << ": " << s.metric;
        }
      }
      EXPECT_TRUE(documented->count(family)) << q.Describe() << ": " << s.metric;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grafana, Dashboards,
                         ::testing::Values("psflow-training.json", "psflow-operator.json"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param == "psflow-training.json" ? "Training"
                                                                             : "Operator";
                         });

// The reference table and the sources agree on names and types (labels: observe_e2e_test, live).
TEST(MetricsDoc, ListsEveryRegisteredMetricWithItsType) {
  auto documented = ParseMetricsTable(Read(SourceDir() + "/docs/metrics.md"));
  ASSERT_TRUE(documented.ok()) << documented.status();
  auto registered = RegisteredInSources(SourceDir());
  ASSERT_TRUE(registered.ok()) << registered.status();
  ASSERT_GE(registered->size(), 40u) << "the source scan found too few metrics";
  for (const auto& [name, family] : *registered) {
    if (!documented->count(name)) {
      ADD_FAILURE() << name << " is registered but not in docs/metrics.md";
      continue;
    }
    EXPECT_EQ((*documented)[name].type, family.type) << name;
  }
  for (const auto& [name, family] : *documented) {
    EXPECT_TRUE(registered->count(name))
        << "docs/metrics.md lists " << name << ", which nothing registers";
  }
  // A metric registered some other way would still be named in a string literal.
  auto literals = MetricNameLiteralsInSources(SourceDir());
  ASSERT_TRUE(literals.ok()) << literals.status();
  for (const std::string& name : *literals) {
    EXPECT_TRUE(documented->count(name)) << name << " (in the sources) is not in docs/metrics.md";
  }
}

TEST(PsflowRun, UnwritableTargetsPathFailsBeforeStartingWithOneLine) {
  const std::string missing = ::testing::TempDir() + "no_such_dir_" + std::to_string(getpid());
  const auto r = RunCommand({testing::Binary("psflow"), "run", "--progress=never",
                             "--prometheus_targets=" + missing + "/targets.json",
                             SourceDir() + "/deploy/examples/mnist-mlp.yaml"},
                            Environment({}), std::chrono::seconds(60));
  EXPECT_EQ(r.status.code, 2) << r.output;
  EXPECT_EQ(r.output, "psflow: --prometheus_targets: cannot write " + missing +
                          "/targets.json: No such file or directory\n");
  EXPECT_FALSE(fs::exists(missing));
}

TEST(PsflowRun, TargetsPathThatIsADirectoryIsLeftAsItWas) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("targets_dir_", getpid());
  fs::create_directories(dir / "job.json");
  const auto r = RunCommand({testing::Binary("psflow"), "run", "--progress=never",
                             "--prometheus_targets=" + (dir / "job.json").string(),
                             SourceDir() + "/deploy/examples/mnist-mlp.yaml"},
                            Environment({}), std::chrono::seconds(60));
  EXPECT_EQ(r.status.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--prometheus_targets: cannot replace"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  // No temporary file left beside it, the directory untouched.
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path().filename());
  EXPECT_THAT(entries, ::testing::ElementsAre("job.json"));
  EXPECT_TRUE(fs::is_directory(dir / "job.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace psflow::observe
