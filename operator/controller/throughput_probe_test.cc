// The throughput probe with a scripted scrape function and a test clock: no network.
#include "operator/controller/throughput_probe.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "operator/controller/throughput_rate.h"

namespace psflow::controller {
namespace {

using kube::Json;

const absl::Time kProbeStart = absl::FromUnixSeconds(1'800'000'000);

PodCounters Sample(const std::string& pod, double examples, std::optional<double> words,
                   double seconds) {
  return {pod, examples, words, kProbeStart + absl::Seconds(seconds)};
}

TEST(ThroughputRate, TwoSamplesGiveTheRateSummedOverPods) {
  ThroughputRate rate;
  EXPECT_FALSE(rate.Update({Sample("a", 100, 1000, 0), Sample("b", 0, 0, 0)}, {"a", "b"})
                   .examples_per_second);
  const Throughput t =
      rate.Update({Sample("a", 400, 7000, 10), Sample("b", 200, 4000, 10)}, {"a", "b"});
  EXPECT_DOUBLE_EQ(t.examples_per_second.value(), 30 + 20);
  EXPECT_DOUBLE_EQ(t.words_per_second.value(), 600 + 400);
}

TEST(ThroughputRate, ADecreaseIsACounterResetNotANegativeRate) {
  ThroughputRate rate;
  rate.Update({Sample("a", 5000, std::nullopt, 0)}, {"a"});
  // The container restarted and counted 300 since.
  const Throughput t = rate.Update({Sample("a", 300, std::nullopt, 10)}, {"a"});
  EXPECT_DOUBLE_EQ(t.examples_per_second.value(), 30);
}

TEST(ThroughputRate, WordsOnlyWhenExportedAndIncreasing) {
  ThroughputRate rate;
  rate.Update({Sample("a", 0, std::nullopt, 0)}, {"a"});
  Throughput t = rate.Update({Sample("a", 100, std::nullopt, 1)}, {"a"});
  EXPECT_DOUBLE_EQ(t.examples_per_second.value(), 100);
  EXPECT_FALSE(t.words_per_second);  // not a language model
  t = rate.Update({Sample("a", 200, 0, 2)}, {"a"});
  EXPECT_FALSE(t.words_per_second);  // exported since this sample only
  t = rate.Update({Sample("a", 300, 0, 3)}, {"a"});
  EXPECT_FALSE(t.words_per_second);  // exported but never counted
  EXPECT_DOUBLE_EQ(t.examples_per_second.value(), 100);
}

TEST(ThroughputRate, APodGoneIsForgottenAndAReplacementStartsOver) {
  ThroughputRate rate;
  rate.Update({Sample("a", 100, std::nullopt, 0), Sample("b", 100, std::nullopt, 0)}, {"a", "b"});
  // b is gone; its replacement c (a new uid) needs two samples before it counts.
  Throughput t = rate.Update({Sample("a", 200, std::nullopt, 1), Sample("c", 50, std::nullopt, 1)},
                             {"a", "c"});
  EXPECT_DOUBLE_EQ(t.examples_per_second.value(), 100);
  t = rate.Update({Sample("a", 300, std::nullopt, 2), Sample("c", 150, std::nullopt, 2)},
                  {"a", "c"});
  EXPECT_DOUBLE_EQ(t.examples_per_second.value(), 200);
  // b back under the same uid after being forgotten: no rate from its stale sample.
  t = rate.Update({Sample("b", 1000, std::nullopt, 3)}, {"b"});
  EXPECT_FALSE(t.examples_per_second);
}

TEST(ThroughputRate, AFailedScrapeKeepsThePreviousSampleForTheNextSuccess) {
  ThroughputRate rate;
  rate.Update({Sample("a", 0, std::nullopt, 0)}, {"a"});
  EXPECT_FALSE(rate.Update({}, {"a"}).examples_per_second);  // every scrape failed
  const Throughput t = rate.Update({Sample("a", 400, std::nullopt, 4)}, {"a"});
  EXPECT_DOUBLE_EQ(t.examples_per_second.value(), 100);
}

TEST(ThroughputChanged, OnPresenceAndBeyondTheFraction) {
  const Throughput base{std::nullopt, 1000.0};
  EXPECT_TRUE(ThroughputChanged(std::nullopt, base, 0.01));
  EXPECT_TRUE(ThroughputChanged(base, std::nullopt, 0.01));
  EXPECT_FALSE(ThroughputChanged(std::nullopt, std::nullopt, 0.01));
  EXPECT_FALSE(ThroughputChanged(base, Throughput{std::nullopt, 1009.0}, 0.01));
  EXPECT_TRUE(ThroughputChanged(base, Throughput{std::nullopt, 1011.0}, 0.01));
  EXPECT_TRUE(ThroughputChanged(base, Throughput{5.0, 1000.0}, 0.01));
  EXPECT_TRUE(
      ThroughputChanged(Throughput{std::nullopt, 0.0}, Throughput{std::nullopt, 1.0}, 0.01));
}

Json Pod(const std::string& name, const std::string& type, const std::string& phase,
         const std::string& ip, std::optional<int> metrics_port) {
  Json container = {{"name", "psflow"}, {"ports", Json::array()}};
  container["ports"].push_back({{"name", "psflow-port"}, {"containerPort", 2222}});
  if (metrics_port)
    container["ports"].push_back({{"name", "metrics"}, {"containerPort", *metrics_port}});
  Json pod = {{"metadata",
               {{"name", name},
                {"uid", "uid-" + name},
                {"labels", {{"psflow.io/replica-type", type}}},
                {"ownerReferences",
                 Json::array({{{"controller", true}, {"uid", "job-uid"}, {"name", "j"}}})}}},
              {"spec", {{"nodeName", "node-1"}, {"containers", Json::array({container})}}},
              {"status", {{"phase", phase}}}};
  if (!ip.empty()) pod["status"]["podIP"] = ip;
  return pod;
}

TEST(ScrapeTargets, RunningWorkersAndChiefWithAnIpOnTheirMetricsPort) {
  const Json job = {{"metadata", {{"name", "j"}, {"uid", "job-uid"}}},
                    {"status", {{"state", "Running"}}}};
  EXPECT_TRUE(ProbedState(job));
  std::vector<ObjectPtr> pods;
  for (Json pod : {Pod("j-worker-0", "worker", "Running", "10.0.0.5", 9200),
                   Pod("j-chief-0", "chief", "Running", "10.0.0.6", std::nullopt),
                   Pod("j-ps-0", "ps", "Running", "10.0.0.7", 9200),
                   Pod("j-worker-1", "worker", "Pending", "", 9200),
                   Pod("j-worker-2", "worker", "Running", "", 9200)}) {
    pods.push_back(std::make_shared<const Json>(pod));
  }
  Json other = Pod("j-worker-3", "worker", "Running", "10.0.0.8", 9200);
  other["metadata"]["ownerReferences"][0]["uid"] = "another-incarnation";
  pods.push_back(std::make_shared<const Json>(other));
  const std::vector<ScrapeTarget> targets = ScrapeTargets(job, pods);
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0].name, "j-worker-0");
  EXPECT_EQ(targets[0].uid, "uid-j-worker-0");
  EXPECT_EQ(targets[0].ip, "10.0.0.5");
  EXPECT_EQ(targets[0].port, 9200);
  EXPECT_EQ(targets[1].name, "j-chief-0");
  EXPECT_EQ(targets[1].port, 9100);
  EXPECT_FALSE(ProbedState(Json{{"status", {{"state", "Succeeded"}}}}));
}

// A probe over scripted jobs whose pods' counters the test sets.
class ThroughputProbeTest : public ::testing::Test {
 protected:
  ThroughputProbeTest()
      : probe_(
            {absl::Seconds(10), 0.01}, [this] { return jobs_; },
            [this](const ScrapeTarget& t) -> absl::StatusOr<std::string> {
              auto it = bodies_.find(t.name);
              if (it == bodies_.end()) return absl::UnavailableError("connection refused");
              return it->second;
            },
            [this](const std::string& key) { changed_.push_back(key); }, [this] { return now_; }) {}

  void SetExamples(const std::string& pod, double examples) {
    bodies_[pod] = absl::StrCat("# TYPE psflow_worker_examples_total counter\n",
                                "psflow_worker_examples_total{job=\"j\"} ", examples, "\n");
  }
  void Round() {
    changed_.clear();
    probe_.ProbeOnce();
    now_ += absl::Seconds(10);
  }

  absl::Time now_ = kProbeStart;
  std::vector<ProbedJob> jobs_ = {
      {"default/j", {{"u0", "w0", "10.0.0.1", 9100}, {"u1", "w1", "10.0.0.2", 9100}}}};
  std::map<std::string, std::string> bodies_;
  std::vector<std::string> changed_;
  ThroughputProbe probe_;
};

TEST_F(ThroughputProbeTest, EnqueuesAJobWhenItsRateAppearsOrChangesBeyondOnePercent) {
  SetExamples("w0", 0);
  SetExamples("w1", 0);
  Round();
  EXPECT_TRUE(changed_.empty());
  EXPECT_FALSE(probe_.Latest("default/j"));
  SetExamples("w0", 1000);
  SetExamples("w1", 1000);
  Round();
  EXPECT_EQ(changed_, std::vector<std::string>{"default/j"});
  EXPECT_DOUBLE_EQ(probe_.Latest("default/j")->examples_per_second.value(), 200);
  EXPECT_FALSE(probe_.Latest("default/j")->words_per_second);
  SetExamples("w0", 2000);
  SetExamples("w1", 2005);  // 200.5/s: within 1%
  Round();
  EXPECT_TRUE(changed_.empty());
  EXPECT_DOUBLE_EQ(probe_.Latest("default/j")->examples_per_second.value(), 200);
  SetExamples("w0", 6000);  // 400/s
  SetExamples("w1", 2005);  // 0/s
  Round();
  EXPECT_EQ(changed_, std::vector<std::string>{"default/j"});
  EXPECT_DOUBLE_EQ(probe_.Latest("default/j")->examples_per_second.value(), 400);
}

TEST_F(ThroughputProbeTest, AnUnreachablePodCountsNothingAndTheOthersStillCount) {
  SetExamples("w0", 0);
  Round();
  SetExamples("w0", 500);
  Round();  // w1 never answers
  EXPECT_DOUBLE_EQ(probe_.Latest("default/j")->examples_per_second.value(), 50);
  bodies_.clear();
  Round();  // nobody answers: no rate, and the job is enqueued (status keeps its value)
  EXPECT_EQ(changed_, std::vector<std::string>{"default/j"});
  EXPECT_FALSE(probe_.Latest("default/j"));
  bodies_["w0"] = "not prometheus text";
  Round();
  EXPECT_FALSE(probe_.Latest("default/j"));
}

TEST_F(ThroughputProbeTest, AJobNoLongerProbedIsDropped) {
  SetExamples("w0", 0);
  SetExamples("w1", 0);
  Round();
  SetExamples("w0", 100);
  SetExamples("w1", 100);
  Round();
  ASSERT_TRUE(probe_.Latest("default/j"));
  jobs_.clear();  // finished or deleted
  Round();
  EXPECT_TRUE(changed_.empty());
  EXPECT_FALSE(probe_.Latest("default/j"));
}

}  // namespace
}  // namespace psflow::controller
