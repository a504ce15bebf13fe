// The worker's Prometheus metrics (psflow_worker_*), labelled {job, replica_type, replica_index}.
#ifndef PSFLOW_WORKER_WORKER_METRICS_H_
#define PSFLOW_WORKER_WORKER_METRICS_H_

#include <mutex>

#include "core/metrics.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"

namespace psflow {

struct WorkerMetrics {
  // Registers the families in `registry`, which must outlive this object. `together` (null: none)
  // is the mutex its scrapes collect under (MetricsEndpoint::collect_mutex).
  WorkerMetrics(prometheus::Registry& registry, const Labels& labels,
                std::mutex* together = nullptr);

  // Held while a step's series are written, so a scrape sees all of them or none.
  std::unique_lock<std::mutex> Together() {
    return together_ != nullptr ? std::unique_lock<std::mutex>(*together_)
                                : std::unique_lock<std::mutex>();
  }

  prometheus::Counter& examples;       // psflow_worker_examples_total
  prometheus::Counter& words;          // psflow_worker_words_total (language models)
  prometheus::Counter& steps;          // psflow_worker_steps_total
  prometheus::Gauge& train_steps;      // psflow_worker_train_steps (this worker's total)
  prometheus::Histogram& step_time;    // psflow_worker_step_duration_seconds
  LateGauge loss;                      // psflow_worker_loss (last step's mean loss)
  prometheus::Counter& skipped_steps;  // psflow_worker_skipped_steps_total (non-finite gradients)
  prometheus::Gauge& loss_scale;       // psflow_worker_loss_scale (1 without loss scaling)
  prometheus::Counter& pushed_bytes;   // psflow_worker_pushed_bytes_total
  prometheus::Counter& pulled_bytes;   // psflow_worker_pulled_bytes_total
  prometheus::Gauge& global_step;      // psflow_worker_global_step (as last seen from the ps)
  LateGauge test_accuracy;             // psflow_worker_test_accuracy_ratio (after training)
  LateGauge test_perplexity;           // psflow_worker_test_perplexity (language models)
  // psflow_worker_replayed_step_seconds: --compute=replay's time per step (a step computes
  // nothing and sleeps this long); 0 when steps compute for real.
  prometheus::Gauge& replayed_step;
  // psflow_worker_step_phase_seconds_total{phase=...}: where the steps' time went. pull: waiting
  // for parameters; compute: forward, backward, clipping and the gradients' way to host memory;
  // push: sending gradients; wait: waiting for the next input batch.
  prometheus::Family<prometheus::Counter>& step_phases;
  prometheus::Counter& pull_seconds;
  prometheus::Counter& compute_seconds;
  prometheus::Counter& push_seconds;
  prometheus::Counter& input_wait_seconds;

 private:
  std::mutex* together_;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_WORKER_METRICS_H_
