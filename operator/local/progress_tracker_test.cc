#include "operator/local/progress_tracker.h"

#include <gtest/gtest.h>

namespace psflow::local {
namespace {

using Clock = ProgressTracker::Clock;
using std::chrono::seconds;

TrainerFigures Figures(double steps, double examples, std::optional<double> train_steps,
                       std::optional<double> loss = std::nullopt, double words = 0) {
  TrainerFigures f;
  f.steps = steps;
  f.examples = examples;
  f.words = words;
  f.loss = loss;
  f.train_steps = train_steps;
  return f;
}

TEST(ProgressTracker, SumsTheTrainersAndKnowsTheTotalOnceEachReportedIt) {
  const Clock::time_point t0{};
  ProgressTracker tracker("job", 2, t0);
  tracker.Update(0, Figures(100, 10000, 1500, 0.5));
  tracker.Update(1, Figures(50, 5000, std::nullopt, 0.7));
  ProgressSnapshot p = tracker.Snapshot(t0 + seconds(1));
  EXPECT_EQ(p.job, "job");
  EXPECT_EQ(p.steps, 150);
  EXPECT_FALSE(p.total_steps.has_value());  // trainer 1 has not said yet
  EXPECT_FALSE(p.eta_s.has_value());
  EXPECT_DOUBLE_EQ(p.rate, 15000);  // since the start
  EXPECT_EQ(p.rate_unit, "examples/s");
  EXPECT_DOUBLE_EQ(*p.loss, 0.6);
  EXPECT_DOUBLE_EQ(p.elapsed_s, 1);

  tracker.Update(0, Figures(300, 30000, 1500, 0.4));
  tracker.Update(1, Figures(150, 15000, 1500, 0.6));
  p = tracker.Snapshot(t0 + seconds(2));
  EXPECT_EQ(p.steps, 450);
  EXPECT_EQ(p.total_steps, 3000);
  EXPECT_DOUBLE_EQ(p.rate, 0.3 * 30000 + 0.7 * 15000);  // smoothed
  const double step_rate = 0.3 * 300 + 0.7 * 150;
  EXPECT_DOUBLE_EQ(*p.eta_s, (3000 - 450) / step_rate);
}

TEST(ProgressTracker, AFinishedTrainerCountsItsReportedStepsAndTheEtaEndsAtZero) {
  const Clock::time_point t0{};
  ProgressTracker tracker("job", 1, t0);
  tracker.Update(0, Figures(990, 99000, 1000));
  tracker.Snapshot(t0 + seconds(1));
  tracker.Finished(0, 1000, 99000, std::nullopt);
  const ProgressSnapshot p = tracker.Snapshot(t0 + seconds(2));
  EXPECT_EQ(p.steps, 1000);
  EXPECT_EQ(p.eta_s, 0);
}

TEST(ProgressTracker, ATrainerThatFinishedBeforeAnyScrapeGivesItsStepsAsItsTotal) {
  const Clock::time_point t0{};
  ProgressTracker tracker("job", 1, t0);
  tracker.Finished(0, 700, 5000, std::nullopt);
  const ProgressSnapshot p = tracker.Snapshot(t0 + seconds(1));
  EXPECT_EQ(p.steps, 700);
  EXPECT_EQ(p.total_steps, 700);
}

// The final line of a run shorter than a scrape: no scrape saw an example, and the trainers'
// own rates are the job's.
TEST(ProgressTracker, OnceEveryTrainerFinishedTheRateIsTheSumOfTheirOwn) {
  const Clock::time_point t0{};
  ProgressTracker tracker("job", 2, t0);
  tracker.Finished(0, 700, 5000, std::nullopt);
  EXPECT_DOUBLE_EQ(tracker.Snapshot(t0 + seconds(1)).rate, 0);  // trainer 1 still runs
  tracker.Finished(1, 650, 4500, std::nullopt);
  ProgressSnapshot p = tracker.Snapshot(t0 + seconds(2));
  EXPECT_DOUBLE_EQ(p.rate, 9500);
  EXPECT_EQ(p.rate_unit, "examples/s");

  ProgressTracker lm("ptb", 2, t0);
  lm.Update(0, Figures(10, 200, 100, std::nullopt, 4000));
  lm.Finished(0, 100, 20, 4100);
  lm.Finished(1, 100, 22, 3900);
  p = lm.Snapshot(t0 + seconds(3));
  EXPECT_DOUBLE_EQ(p.rate, 8000);
  EXPECT_EQ(p.rate_unit, "words/s");

  ProgressTracker unsaid("job", 1, t0);  // a done: line without a rate: the scraped one stays
  unsaid.Update(0, Figures(10, 1000, 10));
  unsaid.Finished(0, 10, std::nullopt, std::nullopt);
  EXPECT_DOUBLE_EQ(unsaid.Snapshot(t0 + seconds(1)).rate, 1000);
}

TEST(ProgressTracker, ARestartedTrainersFallingCountersAreNoRate) {
  const Clock::time_point t0{};
  ProgressTracker tracker("job", 1, t0);
  tracker.Update(0, Figures(100, 1000, 1000));
  EXPECT_DOUBLE_EQ(tracker.Snapshot(t0 + seconds(1)).rate, 1000);
  tracker.Update(0, Figures(5, 50, 1000));
  const ProgressSnapshot p = tracker.Snapshot(t0 + seconds(2));
  EXPECT_EQ(p.steps, 5);
  EXPECT_DOUBLE_EQ(p.rate, 1000);  // unchanged
}

TEST(ProgressTracker, LanguageModelsCountWords) {
  const Clock::time_point t0{};
  ProgressTracker tracker("ptb", 1, t0);
  tracker.Update(0, Figures(10, 200, 100, std::nullopt, 7000));
  const ProgressSnapshot p = tracker.Snapshot(t0 + seconds(2));
  EXPECT_EQ(p.rate_unit, "words/s");
  EXPECT_DOUBLE_EQ(p.rate, 3500);
}

TEST(ProgressTracker, NoTrainersMeansNoTotal) {
  ProgressTracker tracker("job", 0, Clock::time_point{});
  EXPECT_FALSE(tracker.Snapshot(Clock::time_point{} + seconds(1)).total_steps.has_value());
}

}  // namespace
}  // namespace psflow::local
