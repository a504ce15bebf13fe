// The ps task's Prometheus metrics (psflow_ps_*), labelled {job, replica_type, replica_index}.
#ifndef PSFLOW_PS_PS_METRICS_H_
#define PSFLOW_PS_PS_METRICS_H_

#include "core/metrics.h"

namespace psflow {

struct PsMetrics {
  // Registers the families in `registry`, which must outlive this object.
  PsMetrics(prometheus::Registry& registry, const Labels& labels);

  prometheus::Counter& updates;         // psflow_ps_updates_applied_total
  prometheus::Counter& examples;        // psflow_ps_examples_total (behind applied updates)
  prometheus::Counter& pulls;           // psflow_ps_pulls_total
  prometheus::Counter& received_bytes;  // psflow_ps_received_bytes_total (gradient bytes in)
  prometheus::Counter& sent_bytes;      // psflow_ps_sent_bytes_total (parameter bytes out)
  prometheus::Gauge& global_step;       // psflow_ps_global_step
  prometheus::Gauge& variable_bytes;    // psflow_ps_variable_bytes (placement: bytes held)
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_METRICS_H_
