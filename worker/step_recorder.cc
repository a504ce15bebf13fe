#include "worker/step_recorder.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "core/log.h"

namespace psflow {

StepRecorder::StepRecorder(WorkerMetrics* metrics, int64_t total_steps, int64_t positions,
                           int64_t log_every_steps)
    : metrics_(metrics),
      total_steps_(total_steps),
      expected_steps_(total_steps),
      positions_(positions),
      log_every_steps_(log_every_steps) {
  // The total `psflow run` draws its progress bar against.
  if (metrics_ != nullptr) metrics_->train_steps.Set(static_cast<double>(total_steps));
}

double StepRecorder::EpochPerplexity() const {
  return std::exp(epoch_cost_ / static_cast<double>(epoch_positions_));
}

void StepRecorder::StartEpoch(int epoch) {
  if (epoch > 0 && positions_ > 1 && epoch_positions_ > 0) {
    result_.train_perplexity = EpochPerplexity();
    PSFLOW_LOG(INFO) << absl::StrFormat("epoch %d: train perplexity %.3f", epoch,
                                        result_.train_perplexity);
  }
  epoch_cost_ = 0;
  epoch_positions_ = 0;
}

TrainResult& StepRecorder::Finish() {
  if (positions_ > 1 && epoch_positions_ > 0) result_.train_perplexity = EpochPerplexity();
  return result_;
}

void StepRecorder::Pulled(const SyncResult& pulled) {
  result_.global_step = pulled.global_step;
  result_.pulled_bytes += pulled.bytes;
  if (metrics_ != nullptr) metrics_->pulled_bytes.Increment(static_cast<double>(pulled.bytes));
}

void StepRecorder::Pushed(const SyncResult& pushed) {
  if (pushed.dropped) ++result_.dropped_pushes;
  result_.global_step = pushed.global_step;
  result_.exchange_seconds += pushed.background_seconds;
  result_.pushed_bytes += pushed.bytes;
  if (metrics_ != nullptr) {
    metrics_->pushed_bytes.Increment(static_cast<double>(pushed.bytes));
    metrics_->global_step.Set(static_cast<double>(pushed.global_step));
  }
}

void StepRecorder::ExpectSteps(int64_t steps) {
  if (steps == expected_steps_) return;
  expected_steps_ = steps;
  if (metrics_ != nullptr) metrics_->train_steps.Set(static_cast<double>(steps));
}

void StepRecorder::Skipped() {
  ++result_.skipped_steps;
  if (metrics_ != nullptr) metrics_->skipped_steps.Increment();
}

void StepRecorder::Step(const StepTimes& t, int64_t examples, double loss, bool applied,
                        float loss_scale) {
  TrainResult& r = result_;
  r.last_loss = loss;
  r.pull_seconds += t.pull;
  r.compute_seconds += t.compute;
  r.push_seconds += t.push;
  r.examples += examples;
  r.words += examples * positions_;
  window_words_ += examples * positions_;
  if (applied) {  // a skipped step's loss may be infinite too
    epoch_cost_ += loss;
    epoch_positions_ += positions_;
  }
  ++r.steps;
  if (metrics_ != nullptr) {
    WorkerMetrics& m = *metrics_;
    // One step's series, seen together by every scrape.
    const std::unique_lock<std::mutex> together = m.Together();
    m.examples.Increment(static_cast<double>(examples));
    if (positions_ > 1) m.words.Increment(static_cast<double>(examples * positions_));
    m.steps.Increment();
    m.step_time.Observe(t.pull + t.input + t.compute + t.push);
    m.loss.Set(loss);
    m.loss_scale.Set(loss_scale);
    m.pull_seconds.Increment(t.pull);
    m.input_wait_seconds.Increment(t.input);
    m.compute_seconds.Increment(t.compute);
    if (applied) m.push_seconds.Increment(t.push);
  }
  if (log_every_steps_ <= 0 || (r.steps % log_every_steps_ != 0 && r.steps != expected_steps_)) {
    return;
  }
  const Clock::time_point now = Clock::now();
  const double rate = static_cast<double>(window_words_) /
                      std::chrono::duration<double>(now - window_start_).count();
  if (positions_ > 1) {
    // The seed's progress line: perplexity so far this epoch and words per second.
    PSFLOW_LOG(INFO) << absl::StrFormat("step %d/%d global_step %d perplexity %.3f speed: %.0f wps",
                                        r.steps, expected_steps_, r.global_step, EpochPerplexity(),
                                        rate);
  } else {
    PSFLOW_LOG(INFO) << absl::StrFormat("step %d/%d global_step %d loss %.4f examples/s %.0f",
                                        r.steps, expected_steps_, r.global_step, loss, rate);
  }
  window_start_ = now;
  window_words_ = 0;
}

}  // namespace psflow
