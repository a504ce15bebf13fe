// Where a trainer's steps go: the TrainResult, the worker's Prometheus metrics (may be absent)
// and the progress lines (the seed's: perplexity and words/s for language models, loss and
// examples/s otherwise), from what each step and each ParameterSync call report. One thread.
#ifndef PSFLOW_WORKER_STEP_RECORDER_H_
#define PSFLOW_WORKER_STEP_RECORDER_H_

#include <chrono>
#include <cstdint>

#include "worker/parameter_sync.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"

namespace psflow {

// One step's phases, in seconds of the training loop: pull (the Pull call, and with overlap the
// wait for the exchange in flight), input (waiting for the next batch), compute, push (the Push
// call less that wait: with overlap, the hand-over).
struct StepTimes {
  double pull = 0;
  double input = 0;
  double compute = 0;
  double push = 0;
};

class StepRecorder {
 public:
  // positions: predictions per example (> 1 for a language model); log_every_steps 0: no lines.
  StepRecorder(WorkerMetrics* metrics, int64_t total_steps, int64_t positions,
               int64_t log_every_steps);

  // A new epoch (from 0): the finished one's train perplexity is logged (language models).
  void StartEpoch(int epoch);
  // A pull, or a push (a Push, or a Flush outside the steps): bytes, global step, drops, the
  // background exchange's time.
  void Pulled(const SyncResult& pulled);
  void Pushed(const SyncResult& pushed);
  // A step over `examples` with `loss`; `applied` false when its gradients were not finite and
  // were never pushed (its loss counts nowhere).
  void Step(const StepTimes& times, int64_t examples, double loss, bool applied, float loss_scale);
  // A skipped step's counters.
  void Skipped();
  // The steps this trainer now expects to run in all, when a time budget ends it sooner than the
  // constructor's total (time_budget.h): the psflow_worker_train_steps gauge and the progress
  // lines count against it from now on.
  void ExpectSteps(int64_t steps);
  int64_t steps() const { return result_.steps; }

  // The result, with the last epoch's train perplexity; seconds, input wait and the final loss
  // scale are the caller's to add.
  TrainResult& Finish();

 private:
  using Clock = std::chrono::steady_clock;
  double EpochPerplexity() const;

  WorkerMetrics* const metrics_;
  const int64_t total_steps_;
  int64_t expected_steps_;  // total_steps_, or what ExpectSteps said last
  const int64_t positions_;
  const int64_t log_every_steps_;
  TrainResult result_;
  Clock::time_point window_start_ = Clock::now();
  int64_t window_words_ = 0;
  double epoch_cost_ = 0;  // summed loss per example over this epoch's applied steps
  int64_t epoch_positions_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_STEP_RECORDER_H_
