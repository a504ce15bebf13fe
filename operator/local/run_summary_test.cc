#include "operator/local/run_summary.h"

#include <gtest/gtest.h>

namespace psflow::local {
namespace {

constexpr char kDone[] =
    "I 03:21:07.123 main.cc:172] worker 0 done: steps=1500 examples=150000 seconds=12.345 "
    "examples_per_sec=12150.6 global_step=3000 loss=0.4012 pull_ms=0.120 compute_ms=0.310 "
    "push_ms=0.050 input_wait_ms=0.001 dropped_pushes=0 exchange_ms=0.200 skipped_steps=0 "
    "loss_scale=1 test_loss=0.4500 test_accuracy=0.8380";

TEST(LineField, FindsWholeKeysOnly) {
  EXPECT_EQ(LineField(kDone, "steps"), 1500);
  EXPECT_EQ(LineField(kDone, "loss"), 0.4012);  // not test_loss's
  EXPECT_EQ(LineField(kDone, "test_loss"), 0.45);
  EXPECT_EQ(LineField("steps=7", "steps"), 7);
  EXPECT_FALSE(LineField(kDone, "words_per_sec").has_value());
  EXPECT_FALSE(LineField("steps=many", "steps").has_value());
}

TEST(ObserveLogLine, ReadsTheDoneLineTheEvaluatorsFiguresAndThePsStep) {
  ReplicaReport worker;
  ObserveLogLine("I 03:21:00.000 trainer.cc:60] 1500 steps, 300 per epoch", worker);
  EXPECT_FALSE(worker.steps.has_value());
  EXPECT_TRUE(ObserveLogLine(kDone, worker));
  EXPECT_EQ(worker.steps, 1500);
  EXPECT_EQ(worker.examples_per_sec, 12150.6);
  EXPECT_EQ(worker.compute_ms, 0.31);
  EXPECT_EQ(worker.push_ms, 0.05);
  EXPECT_EQ(worker.pull_ms, 0.12);
  EXPECT_EQ(worker.wait_ms, 0.001);
  EXPECT_EQ(worker.test_accuracy, 0.838);
  EXPECT_EQ(worker.global_step, 3000);
  EXPECT_FALSE(worker.words_per_sec.has_value());

  ReplicaReport evaluator;
  ObserveLogLine("I 0 e.cc:41] evaluator 0: global_step=200 test_loss=0.9 test_accuracy=0.6",
                 evaluator);
  ObserveLogLine("I 0 e.cc:41] evaluator 0: global_step=2900 test_loss=0.5 test_accuracy=0.81",
                 evaluator);
  EXPECT_EQ(evaluator.evaluated_step, 2900);
  EXPECT_EQ(evaluator.test_accuracy, 0.81);

  ReplicaReport ps;
  ObserveLogLine("I 0 main.cc:157] ps task 0 stopped: global_step=3000", ps);
  EXPECT_EQ(ps.ps_global_step, 3000);
}

ReplicaReport Report(const std::string& name, const std::string& exit, int restarts = 0) {
  ReplicaReport r;
  r.name = name;
  r.exit = exit;
  r.restarts = restarts;
  return r;
}

std::vector<ReplicaReport> Reports() {
  ReplicaReport ps = Report("ps-0", "stopped");
  ObserveLogLine("ps task 0 stopped: global_step=3000", ps);
  ReplicaReport worker = Report("worker-0", "exit 0");
  ObserveLogLine(kDone, worker);
  ReplicaReport evaluator = Report("evaluator-0", "exit 1", 1);
  ObserveLogLine("evaluator 0: global_step=2900 test_loss=0.5 test_accuracy=0.81", evaluator);
  return {ps, worker, evaluator};
}

TEST(StoppedExit, IsPlainStoppedForTheWaysAStopShouldEnd) {
  const struct {
    int code, signal;
    std::string text;
  } cases[] = {
      {0, 0, "stopped"},            // a ps
      {143, 0, "stopped"},          // a worker
      {0, 15, "stopped"},           // an evaluator: by the SIGTERM
      {0, 9, "stopped, signal 9"},  // still running after the grace
      {1, 0, "stopped, exit 1"},    // failed as it stopped
      {0, 6, "stopped, signal 6"},  // aborted
      {137, 0, "stopped, exit 137"},
  };
  for (const auto& c : cases) EXPECT_EQ(StoppedExit(c.code, c.signal), c.text) << c.text;
}

TEST(FormatSummaryTable, AlignsOneRowPerReplica) {
  EXPECT_EQ(FormatSummaryTable(Reports(), /*ansi=*/false),
            "replica      exit                steps  examples/s  compute ms  push ms  pull ms  "
            "wait ms  evaluation\n"
            "ps-0         stopped                 -           -           -        -        -  "
            "      -  global step 3000\n"
            "worker-0     exit 0               1500     12150.6       0.310    0.050    0.120  "
            "  0.001  accuracy 0.8380\n"
            "evaluator-0  exit 1 (1 restart)      -           -           -        -        -  "
            "      -  accuracy 0.8100 at step 2900\n");
}

TEST(FormatSummaryTable, BoldHeaderOnlyForATerminal) {
  const std::string table = FormatSummaryTable(Reports(), /*ansi=*/true);
  EXPECT_EQ(table.rfind("\033[1mreplica ", 0), 0u) << table;
  EXPECT_EQ(FormatSummaryTable(Reports(), false).find('\033'), std::string::npos);
}

TEST(FormatSummaryTable, LanguageModelsShowWordsPerSecondAndPerplexity) {
  ReplicaReport worker = Report("worker-0", "exit 0");
  ObserveLogLine(
      "worker 0 done: steps=100 examples=2000 seconds=10 examples_per_sec=200.0 global_step=100 "
      "loss=4.1 pull_ms=1.000 compute_ms=20.000 push_ms=1.500 input_wait_ms=0.000 words=70000 "
      "words_per_sec=7000.0 train_perplexity=150.123 valid_perplexity=140.5 "
      "test_perplexity=135.250",
      worker);
  EXPECT_EQ(FormatSummaryTable({worker}, false),
            "replica   exit    steps  words/s  compute ms  push ms  pull ms  wait ms  evaluation\n"
            "worker-0  exit 0    100   7000.0      20.000    1.500    1.000    0.000  "
            "perplexity 135.250\n");
}

}  // namespace
}  // namespace psflow::local
