#include "ps/ps_metrics.h"

namespace psflow {

PsMetrics::PsMetrics(prometheus::Registry& r, const Labels& labels)
    : updates(AddCounter(r, "psflow_ps_updates_applied_total",
                         "Gradient pushes applied to the variables.", labels)),
      examples(AddCounter(r, "psflow_ps_examples_total",
                          "Training examples behind the applied pushes.", labels)),
      pulls(AddCounter(r, "psflow_ps_pulls_total", "Parameter pulls served.", labels)),
      received_bytes(AddCounter(r, "psflow_ps_received_bytes_total",
                                "Gradient tensor bytes received.", labels)),
      sent_bytes(
          AddCounter(r, "psflow_ps_sent_bytes_total", "Parameter tensor bytes sent.", labels)),
      global_step(AddGauge(r, "psflow_ps_global_step",
                           "Global step: pushes applied since initialisation.", labels)),
      variable_bytes(AddGauge(r, "psflow_ps_variable_bytes",
                              "Bytes of variables this ps task holds.", labels)) {}

}  // namespace psflow
