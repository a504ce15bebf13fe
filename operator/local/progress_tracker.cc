#include "operator/local/progress_tracker.h"

#include <algorithm>
#include <utility>

namespace psflow::local {
namespace {

// Weight of the newest interval in the moving averages (tqdm's default smoothing).
constexpr double kSmoothing = 0.3;

double Smooth(std::optional<double> average, double sample) {
  return average ? kSmoothing * sample + (1 - kSmoothing) * *average : sample;
}

}  // namespace

ProgressTracker::ProgressTracker(std::string job, int trainers, Clock::time_point start)
    : job_(std::move(job)),
      start_(start),
      trainers_(static_cast<size_t>(trainers)),
      finished_(static_cast<size_t>(trainers)),
      last_time_(start) {}

void ProgressTracker::Update(int trainer, const TrainerFigures& figures) {
  trainers_.at(static_cast<size_t>(trainer)) = figures;
}

void ProgressTracker::Finished(int trainer, double steps, std::optional<double> examples_per_sec,
                               std::optional<double> words_per_sec) {
  auto& t = trainers_.at(static_cast<size_t>(trainer));
  if (!t) t = TrainerFigures{};
  t->steps = steps;
  t->train_steps = steps;  // it ran them all
  finished_.at(static_cast<size_t>(trainer)) = FinishedRates{examples_per_sec, words_per_sec};
}

ProgressTracker::Sums ProgressTracker::Sum() const {
  Sums s;
  for (const auto& t : trainers_) {
    if (!t) continue;
    s.steps += t->steps;
    s.examples += t->examples;
    s.words += t->words;
  }
  return s;
}

ProgressSnapshot ProgressTracker::Snapshot(Clock::time_point now) {
  const Sums sums = Sum();
  const double dt = std::chrono::duration<double>(now - last_time_).count();
  const bool words = sums.words > 0;
  if (dt > 0) {
    const double units =
        words ? sums.words - last_sums_.words : sums.examples - last_sums_.examples;
    const double steps = sums.steps - last_sums_.steps;
    // A restarted trainer's counters start again: a fall is no rate.
    if (units >= 0) unit_rate_ = Smooth(unit_rate_, units / dt);
    if (steps >= 0) step_rate_ = Smooth(step_rate_, steps / dt);
    last_sums_ = sums;
    last_time_ = now;
  }

  ProgressSnapshot p;
  p.job = job_;
  p.steps = static_cast<int64_t>(sums.steps);
  p.rate = unit_rate_.value_or(0);
  p.rate_unit = words ? "words/s" : "examples/s";
  // Every trainer finished: their own rates, summed.
  const bool all_finished =
      !finished_.empty() &&
      std::all_of(finished_.begin(), finished_.end(), [](const auto& f) { return f.has_value(); });
  if (all_finished) {
    const bool all_words = std::all_of(finished_.begin(), finished_.end(),
                                       [](const auto& f) { return f->words_per_sec.has_value(); });
    double rate = 0;
    bool known = true;
    for (const auto& f : finished_) {
      const std::optional<double>& r = all_words ? f->words_per_sec : f->examples_per_sec;
      if (!r) known = false;
      rate += r.value_or(0);
    }
    if (known) {
      p.rate = rate;
      p.rate_unit = all_words ? "words/s" : "examples/s";
    }
  }
  p.elapsed_s = std::chrono::duration<double>(now - start_).count();
  double total = 0, loss = 0;
  int losses = 0;
  bool all_totals = !trainers_.empty();
  for (const auto& t : trainers_) {
    if (!t || !t->train_steps) {
      all_totals = false;
    } else {
      total += *t->train_steps;
    }
    if (t && t->loss) {
      loss += *t->loss;
      ++losses;
    }
  }
  if (all_totals) p.total_steps = static_cast<int64_t>(total);
  if (losses > 0) p.loss = loss / losses;
  if (p.total_steps && p.steps >= *p.total_steps) {
    p.eta_s = 0;
  } else if (p.total_steps && step_rate_ && *step_rate_ > 0) {
    p.eta_s = static_cast<double>(*p.total_steps - p.steps) / *step_rate_;
  }
  return p;
}

}  // namespace psflow::local
