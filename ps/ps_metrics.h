// The ps task's Prometheus metrics (psflow_ps_*), labelled {job, replica_type, replica_index}.
#ifndef PSFLOW_PS_PS_METRICS_H_
#define PSFLOW_PS_PS_METRICS_H_

#include <string>

#include "core/metrics.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"

namespace psflow {

struct PsMetrics {
  // Registers the families in `registry`, which must outlive this object.
  PsMetrics(prometheus::Registry& registry, const Labels& labels);

  // psflow_ps_partition_bytes{partition="..."}: bytes of one partition this task holds.
  void SetPartitionBytes(const std::string& partition, double bytes);

  prometheus::Counter& updates;         // psflow_ps_updates_applied_total (steps applied)
  prometheus::Counter& examples;        // psflow_ps_examples_total (behind applied updates)
  prometheus::Counter& pulls;           // psflow_ps_pulls_total (bulk pull calls)
  prometheus::Counter& pushes;          // psflow_ps_pushes_total (bulk push calls received)
  prometheus::Counter& received_bytes;  // psflow_ps_received_bytes_total (gradient bytes in)
  prometheus::Counter& sent_bytes;      // psflow_ps_sent_bytes_total (parameter bytes out)
  prometheus::Counter& dropped_stale;   // psflow_ps_gradients_dropped_total{reason="stale"}
  prometheus::Counter& dropped_backup;  // psflow_ps_gradients_dropped_total{reason="backup"}
  // psflow_ps_gradients_dropped_total{reason="given_up"}: late chunks of a push given up
  prometheus::Counter& dropped_given_up;
  // psflow_ps_gradients_dropped_total{reason="joining"}: sync, a worker's push before it counts
  prometheus::Counter& dropped_joining;
  prometheus::Counter& dropped_repeated;
  prometheus::Counter& wait_seconds;  // psflow_ps_aggregation_wait_seconds_total
  prometheus::Counter& checkpoints;   // psflow_ps_checkpoints_written_total
  prometheus::Histogram& staleness;   // psflow_ps_staleness_steps
  prometheus::Gauge& global_step;     // psflow_ps_global_step
  prometheus::Gauge& variable_bytes;  // psflow_ps_variable_bytes (placement: bytes held)
  prometheus::Gauge& learning_rate;   // psflow_ps_learning_rate
  prometheus::Gauge& workers;         // psflow_ps_workers (StepCoordinator::workers)

 private:
  Labels labels_;
  prometheus::Family<prometheus::Gauge>& partition_bytes_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_METRICS_H_
