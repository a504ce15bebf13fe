// Turns what `psflow run` scrapes from its trainers' /metrics into a ProgressSnapshot: steps
// against the total, a smoothed rate, the mean loss and an ETA. No I/O and no clock of its own:
// the caller passes the time, so tests drive it directly. Not thread-safe.
#ifndef PSFLOW_OPERATOR_LOCAL_PROGRESS_TRACKER_H_
#define PSFLOW_OPERATOR_LOCAL_PROGRESS_TRACKER_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "operator/local/progress_bar.h"

namespace psflow::local {

// One trainer's psflow_worker_* figures, as last scraped (counters since the process started).
struct TrainerFigures {
  double steps = 0;                   // psflow_worker_steps_total
  double examples = 0;                // psflow_worker_examples_total
  double words = 0;                   // psflow_worker_words_total (language models; 0 otherwise)
  std::optional<double> loss;         // psflow_worker_loss
  std::optional<double> train_steps;  // psflow_worker_train_steps: set once training starts
};

class ProgressTracker {
 public:
  using Clock = std::chrono::steady_clock;

  // `trainers`: how many trainers the job has (indices 0..trainers-1); `start`: the job's start.
  ProgressTracker(std::string job, int trainers, Clock::time_point start);

  // Trainer `trainer`'s latest figures; they replace the previous ones (a finished trainer keeps
  // its last, a restarted one starts again from its new process's counters).
  void Update(int trainer, const TrainerFigures& figures);
  // What trainer `trainer` reported when it finished (its `done:` line): its steps (the scrapes
  // may have missed the last few, or all of them: then they are its total too) and its own
  // rates over its training loop (words/s for a language model, nullopt where not said).
  void Finished(int trainer, double steps, std::optional<double> examples_per_sec,
                std::optional<double> words_per_sec);

  // The figures at `now`, after a round of Update calls. The rates are those since the previous
  // call (or the start), smoothed over the calls (an exponential moving average, weight 0.3 for
  // the newest, as tqdm's); words/s once any trainer reports words, else examples/s. The total is
  // known once every trainer has reported its train steps; the ETA is the steps left at the
  // smoothed step rate. Once every trainer has finished, the rate is the sum of their own
  // (Finished): the job's throughput, also for a run shorter than a scrape, whose scrapes saw
  // no example.
  ProgressSnapshot Snapshot(Clock::time_point now);

 private:
  struct Sums {
    double steps = 0, examples = 0, words = 0;
  };
  Sums Sum() const;

  std::string job_;
  Clock::time_point start_;
  std::vector<std::optional<TrainerFigures>> trainers_;
  struct FinishedRates {
    std::optional<double> examples_per_sec, words_per_sec;
  };
  std::vector<std::optional<FinishedRates>> finished_;  // per trainer, once it has finished
  Sums last_sums_;                                      // at last_time_; zero at the start
  Clock::time_point last_time_;
  std::optional<double> step_rate_;  // steps per second, smoothed
  std::optional<double> unit_rate_;  // examples (or words) per second, smoothed
};

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_PROGRESS_TRACKER_H_
