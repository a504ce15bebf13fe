// The observability stack against live processes (tests/observe/observed_run.h): a real
// Prometheus, configured from deploy/prometheus/, scrapes a `psflow run` job through the targets
// file the runner writes and psflow-operator driving a job on the test API server; every panel
// query of deploy/grafana/ is evaluated through Prometheus's HTTP API, the throughput panels are
// compared with each worker's counters, docs/metrics.md with what the processes serve, and the
// alert rules are loaded and quiet. The tests share that one run (ctest runs this binary as one
// test), so the whole takes about as long as the training.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/observe/grafana_dashboard.h"
#include "tests/observe/metrics_reference.h"
#include "tests/observe/observed_run.h"
#include "tests/test_util.h"

namespace psflow::observe {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

std::string ReadSource(const std::string& relative) {
  std::ifstream in(testing::SourceDir() + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<PanelQuery> QueriesOf(const std::string& file) {
  auto dashboard = LoadDashboard(testing::SourceDir() + "/deploy/grafana/" + file);
  EXPECT_TRUE(dashboard.ok()) << dashboard.status();
  if (!dashboard.ok()) return {};
  auto queries = PanelQueries(*dashboard, file);
  EXPECT_TRUE(queries.ok()) << queries.status();
  return queries.value_or(std::vector<PanelQuery>{});
}

bool ReadsGpuMetrics(const PanelQuery& q) {
  return absl::StrContains(q.expr, "psflow_worker_gpu_");
}

// The test-set figures exist only once a worker has evaluated (absent until then, not 0), and the
// observed run trains on synthetic data, which has no test split: none is ever set. That a
// worker's final figure reaches a scraping Prometheus is OwnModelTest's
// AScrapingPrometheusSeesTheFinalAccuracyBeforeTheWorkerExits.
bool ReadsTestFigures(const PanelQuery& q) {
  return absl::StrContains(q.expr, "psflow_worker_test_");
}

class ObserveE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (PrometheusBinary().empty()) return;
    auto run = ObservedRun::Run();
    if (run.ok()) {
      run_ = run->release();
    } else {
      setup_ = run.status();
    }
  }
  static void TearDownTestSuite() {
    delete run_;
    run_ = nullptr;
  }
  void SetUp() override {
    if (PrometheusBinary().empty()) {
      // scripts/setup.sh installs it: its absence is a broken setup, not a reason to skip.
      GTEST_FAIL() << "prometheus not found: install Debian's prometheus (scripts/setup.sh)";
    }
    ASSERT_TRUE(setup_.ok()) << setup_;
  }

  // What Grafana would put in for the variables: every namespace (absent here), the job.
  static std::map<std::string, std::string> Variables(const std::string& job) {
    return {{"namespace", ".*"},  {"job", job},      {"__rate_interval", "15s"},
            {"__interval", "1s"}, {"__range", "5m"}, {"datasource", "prometheus"}};
  }

  // Evaluates q at the end of the training window; the "result" array, or a failure.
  static Json Evaluate(const PanelQuery& q, const std::map<std::string, std::string>& variables) {
    const std::string expr = SubstituteVariables(q.expr, variables);
    EXPECT_THAT(expr, ::testing::Not(HasSubstr("$"))) << q.Describe() << ": unknown variable";
    auto data = run_->prometheus().Query(expr, run_->window_end());
    EXPECT_TRUE(data.ok()) << q.Describe() << ": Prometheus rejects\n  " << expr << "\n"
                           << data.status();
    return data.ok() ? (*data)["result"] : Json::array();
  }

  static inline ObservedRun* run_ = nullptr;
  static inline absl::Status setup_;
};

TEST_F(ObserveE2e, RunSucceededAndItsTargetsFileListedEveryReplicaThenNone) {
  EXPECT_TRUE(run_->run_status().ok()) << run_->run_output();
  const Json listed = Json::parse(run_->targets_while_training());
  std::set<std::string> replicas;
  for (const Json& group : listed) {
    ASSERT_EQ(group["targets"].size(), 1u) << group;
    EXPECT_TRUE(absl::StartsWith(group["targets"][0].get<std::string>(), "127.0.0.1:")) << group;
    EXPECT_EQ(group["labels"]["job"], ObservedRun::kJobName) << group;
    const std::string type = group["labels"]["replica_type"],
                      index = group["labels"]["replica_index"];
    replicas.insert(type + "-" + index);
    // The address is that replica's own endpoint: its metrics carry the same labels.
    ASSERT_TRUE(run_->scraped().count(type + "-" + index)) << group;
    EXPECT_THAT(
        run_->scraped().at(type + "-" + index),
        HasSubstr(absl::StrCat("replica_index=\"", index, "\",replica_type=\"", type, "\"")));
  }
  EXPECT_EQ(replicas, (std::set<std::string>{"ps-0", "worker-0", "worker-1"}));
  EXPECT_EQ(Json::parse(run_->targets_after(), nullptr, false), Json::array())
      << run_->targets_after();
}

TEST_F(ObserveE2e, PrometheusScrapedEveryReplicaUnderTheTrainingJobsName) {
  auto up = run_->prometheus().Query(absl::StrCat("up{job=\"", ObservedRun::kJobName, "\"}"),
                                     run_->window_end());
  ASSERT_TRUE(up.ok()) << up.status();
  std::set<std::string> replicas;
  for (const Json& series : (*up)["result"]) {
    EXPECT_EQ(series["value"][1], "1") << series;
    replicas.insert(series["metric"].value("replica_type", "?") + "-" +
                    series["metric"].value("replica_index", "?"));
  }
  EXPECT_EQ(replicas, (std::set<std::string>{"ps-0", "worker-0", "worker-1"})) << *up;
}

TEST_F(ObserveE2e, TrainingDashboardPanelsReturnData) {
  int checked = 0;
  for (const PanelQuery& q : QueriesOf("psflow-training.json")) {
    // GpuPanelsOnlyCheckedForSyntaxWithoutAGpu, TestFigurePanelsOnlyCheckedForSyntax...
    if (ReadsGpuMetrics(q) || ReadsTestFigures(q)) continue;
    EXPECT_FALSE(Evaluate(q, Variables(ObservedRun::kJobName)).empty())
        << q.Describe() << ": no data\n  " << q.expr;
    ++checked;
  }
  EXPECT_GE(checked, 25);
}

// Exempt from returning data: this machine and CI have no GPU (workers run --device=cpu, so no
// psflow_worker_gpu_* series exist). The queries must still be valid PromQL that Prometheus
// accepts; the metric names are checked against docs/metrics.md and the sources by
// observe_static_test.
TEST_F(ObserveE2e, GpuPanelsOnlyCheckedForSyntaxWithoutAGpu) {
  int checked = 0;
  for (const PanelQuery& q : QueriesOf("psflow-training.json")) {
    if (!ReadsGpuMetrics(q)) continue;
    Evaluate(q, Variables(ObservedRun::kJobName));
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

// Exempt from returning data: the observed run's workers never evaluate (ReadsTestFigures). The
// queries must still be valid PromQL that Prometheus accepts.
TEST_F(ObserveE2e, TestFigurePanelsOnlyCheckedForSyntaxOnSyntheticData) {
  int checked = 0;
  for (const PanelQuery& q : QueriesOf("psflow-training.json")) {
    if (!ReadsTestFigures(q)) continue;
    Evaluate(q, Variables(ObservedRun::kJobName));
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// The operator runs against the test API server here (no Kubernetes cluster), so its panels do
// have data: the job it drove went Created, Running, Succeeded.
TEST_F(ObserveE2e, OperatorDashboardPanelsReturnDataFromTheOperatorOnTheTestApiserver) {
  int checked = 0;
  for (const PanelQuery& q : QueriesOf("psflow-operator.json")) {
    EXPECT_FALSE(Evaluate(q, Variables(ObservedRun::kOperatorScrapeJob)).empty())
        << q.Describe() << ": no data\n  " << q.expr;
    ++checked;
  }
  EXPECT_GE(checked, 15);
  // And the figures behind them are the job's: pods created, one job through to Running.
  for (const char* counter :
       {"psflow_operator_pods_created_total", "psflow_operator_job_time_to_running_seconds_count",
        "psflow_operator_reconcile_total"}) {
    auto value = run_->prometheus().Query(counter, run_->window_end());
    ASSERT_TRUE(value.ok()) << value.status();
    ASSERT_EQ((*value)["result"].size(), 1u) << counter << ": " << *value;
    EXPECT_GE(std::stod((*value)["result"][0]["value"][1].get<std::string>()), 1) << counter;
  }
}

// Grafana fills `namespace` and `job` with label_values(metric, label); the same selection as
// PromQL must list the running job (and, locally, the empty namespace that ".*" matches).
TEST_F(ObserveE2e, TemplateVariablesFindTheJobs) {
  for (const auto& [file, job] :
       {std::pair<std::string, std::string>{"psflow-training.json", ObservedRun::kJobName},
        {"psflow-operator.json", ObservedRun::kOperatorScrapeJob}}) {
    auto dashboard = LoadDashboard(testing::SourceDir() + "/deploy/grafana/" + file);
    ASSERT_TRUE(dashboard.ok()) << dashboard.status();
    for (const Json& v : (*dashboard)["templating"]["list"]) {
      if (v["type"] != "query") continue;
      // label_values(selector, label)
      const std::string query = v["query"]["query"];
      const size_t open = query.find('('), comma = query.rfind(',');
      ASSERT_TRUE(absl::StartsWith(query, "label_values(") && comma != std::string::npos) << query;
      const std::string selector = query.substr(open + 1, comma - open - 1);
      const std::string label(
          absl::StripAsciiWhitespace(query.substr(comma + 1, query.size() - comma - 2)));
      const std::string expr = SubstituteVariables(
          absl::StrCat("count by (", label, ") (", selector, ")"), Variables(job));
      auto values = run_->prometheus().Query(expr, run_->window_end());
      ASSERT_TRUE(values.ok()) << file << ": " << expr << ": " << values.status();
      std::set<std::string> found;
      for (const Json& s : (*values)["result"]) found.insert(s["metric"].value(label, ""));
      EXPECT_TRUE(found.count(label == "job" ? job : "")) << file << ": " << expr << " " << *values;
    }
  }
}

// The throughput panels show each worker's rate and the job's sum over the interval in which both
// workers trained: each figure equals the plainest query for it, rate() of one worker's counter
// selected by job and replica_index (the job's: their sum). The words per example of those rates
// is what the workers log (words_per_sec / examples_per_sec), which tells the two counters apart.
// The logged rates themselves cover each worker's whole loop, first steps and solo end included,
// and how fast a worker runs on 2 shared cores depends on what else runs, so they are printed,
// not compared.
TEST_F(ObserveE2e, ThroughputPanelsShowTheRatesOfEachWorkersCounters) {
  const std::string interval =
      absl::StrCat(std::llround(1e3 * (run_->window_end() - run_->window_start())), "ms");
  std::printf("both workers trained throughout %s of samples\n", interval.c_str());
  std::map<std::string, double> expected;  // "worker-0 examples", "job words" -> per second
  for (const std::string index : {"0", "1"}) {
    const auto done = testing::LinesWith(run_->run_output(), "worker " + index + " done:");
    ASSERT_EQ(done.size(), 1u) << run_->run_output();
    const double logged_examples = testing::Field(done[0], "examples_per_sec");
    const double logged_words = testing::Field(done[0], "words_per_sec");
    ASSERT_GT(logged_examples, 0) << done[0];
    const std::string worker = "worker-" + index;
    for (const char* what : {"examples", "words"}) {
      const std::string expr =
          absl::StrCat("rate(psflow_worker_", what, "_total{job=\"", ObservedRun::kJobName,
                       "\", replica_index=\"", index, "\"}[", interval, "])");
      auto data = run_->prometheus().Query(expr, run_->window_end());
      ASSERT_TRUE(data.ok()) << expr << ": " << data.status();
      ASSERT_EQ((*data)["result"].size(), 1u) << expr << ": " << *data;
      const double rate = std::stod((*data)["result"][0]["value"][1].get<std::string>());
      ASSERT_GT(rate, 0) << expr;
      expected[absl::StrCat(worker, " ", what)] = rate;
      expected[absl::StrCat("job ", what)] += rate;
    }
    const double examples = expected[worker + " examples"], words = expected[worker + " words"];
    std::printf("%s: %.0f examples/s, %.0f words/s while both trained; %.0f and %.0f logged\n",
                worker.c_str(), examples, words, logged_examples, logged_words);
    // Scrapes see a step's increments together (WorkerMetrics::Together); the log prints %.1f.
    EXPECT_NEAR(words / examples, logged_words / logged_examples, 1e-3 * words / examples)
        << done[0];
  }
  std::map<std::string, std::string> variables = Variables(ObservedRun::kJobName);
  variables["__rate_interval"] = interval;
  const std::map<std::string, std::string> panels = {
      {"Examples/s per worker", "examples"},
      {"Words/s per worker (language models)", "words"},
      {"Examples/s per job", "examples"},
      {"Words/s per job (language models)", "words"}};
  int compared = 0;
  for (const PanelQuery& q : QueriesOf("psflow-training.json")) {
    auto panel = panels.find(q.panel);
    if (panel == panels.end()) continue;
    for (const Json& series : Evaluate(q, variables)) {
      const std::string who = series["metric"].contains("replica_index")
                                  ? "worker-" + series["metric"]["replica_index"].get<std::string>()
                                  : "job";
      const double shown = std::stod(series["value"][1].get<std::string>());
      const double want = expected.at(who + " " + panel->second);
      std::printf("%s, %s: %.1f (rate() of its counters: %.1f)\n", q.panel.c_str(), who.c_str(),
                  shown, want);
      EXPECT_NEAR(shown, want, 1e-9 * want) << q.Describe() << " shows " << shown << " for " << who;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 6);  // per worker: 2 + 2, per job: 1 + 1
}

// docs/metrics.md's table against /metrics of the live ps, workers and operator: every family
// served is listed with its type and exact label names, and every listed one is served, but for
// the GPU gauges (no GPU here: observe_static_test checks them against the sources).
TEST_F(ObserveE2e, MetricsDocMatchesWhatLiveProcessesServe) {
  auto documented = ParseMetricsTable(ReadSource("docs/metrics.md"));
  ASSERT_TRUE(documented.ok()) << documented.status();
  std::set<std::string> served;
  for (const auto& [who, text] : run_->scraped()) {
    for (const auto& [name, family] : ParseExposition(text)) {
      if (!absl::StartsWith(name, "psflow_")) continue;
      served.insert(name);
      if (!documented->count(name)) {
        ADD_FAILURE() << who << " serves " << name << ", which docs/metrics.md does not list";
        continue;
      }
      EXPECT_EQ((*documented)[name].type, family.type) << who << ": " << name;
      EXPECT_EQ((*documented)[name].labels, family.labels) << who << ": " << name;
    }
  }
  for (const auto& [name, family] : *documented) {
    // No GPU here; no evaluation on synthetic data (ReadsTestFigures).
    if (absl::StrContains(name, "_gpu_") || absl::StartsWith(name, "psflow_worker_test_")) {
      continue;
    }
    EXPECT_TRUE(served.count(name)) << name << " is documented but no live process serves it";
  }
}

TEST_F(ObserveE2e, AlertRulesLoadAndStayQuietWhileTheJobTrains) {
  auto rules = run_->prometheus().Api("rules", {});
  ASSERT_TRUE(rules.ok()) << rules.status();
  int loaded = 0;
  for (const Json& group : (*rules)["groups"]) {
    for (const Json& rule : group["rules"]) {
      EXPECT_EQ(rule["health"], "ok") << rule;
      ++loaded;
    }
  }
  EXPECT_EQ(loaded, 4) << *rules;
  // The recording rule sees the job's steps; no alert is pending or firing.
  auto steps = run_->prometheus().Query(
      absl::StrCat("job:psflow_worker_steps:rate5m{job=\"", ObservedRun::kJobName, "\"}"),
      run_->window_end());
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ((*steps)["result"].size(), 1u) << *steps;
  EXPECT_GT(std::stod((*steps)["result"][0]["value"][1].get<std::string>()), 0);
  auto alerts = run_->prometheus().Query("ALERTS", run_->window_end());
  ASSERT_TRUE(alerts.ok()) << alerts.status();
  EXPECT_TRUE((*alerts)["result"].empty()) << *alerts;
}

}  // namespace
}  // namespace psflow::observe
