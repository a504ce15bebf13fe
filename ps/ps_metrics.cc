#include "ps/ps_metrics.h"

namespace psflow {
namespace {

Labels With(Labels labels, const std::string& key, const std::string& value) {
  labels[key] = value;
  return labels;
}

// One family, one series per reason (Register returns the family already registered).
prometheus::Family<prometheus::Counter>& DroppedFamily(prometheus::Registry& r) {
  return prometheus::BuildCounter()
      .Name("psflow_ps_gradients_dropped_total")
      .Help("Gradient chunks not applied (sync mode), by reason.")
      .Register(r);
}

prometheus::Histogram& AddStalenessHistogram(prometheus::Registry& r, const Labels& labels) {
  return prometheus::BuildHistogram()
      .Name("psflow_ps_staleness_steps")
      .Help("Async pushes: the ps's step minus the step the gradients were computed at.")
      .Register(r)
      .Add(labels, prometheus::Histogram::BucketBoundaries{0, 1, 2, 4, 8, 16, 32, 64, 128});
}

}  // namespace

PsMetrics::PsMetrics(prometheus::Registry& r, const Labels& labels)
    : updates(AddCounter(r, "psflow_ps_updates_applied_total",
                         "Steps applied to the variables (async: pushes; sync: aggregations).",
                         labels)),
      examples(AddCounter(r, "psflow_ps_examples_total",
                          "Training examples behind the applied gradients.", labels)),
      pulls(AddCounter(r, "psflow_ps_pulls_total", "Bulk pull calls served.", labels)),
      pushes(AddCounter(r, "psflow_ps_pushes_total", "Bulk push calls received.", labels)),
      received_bytes(AddCounter(r, "psflow_ps_received_bytes_total",
                                "Tensor bytes received (gradients and initial values).", labels)),
      sent_bytes(
          AddCounter(r, "psflow_ps_sent_bytes_total", "Parameter tensor bytes sent.", labels)),
      dropped_stale(DroppedFamily(r).Add(With(labels, "reason", "stale"))),
      dropped_backup(DroppedFamily(r).Add(With(labels, "reason", "backup"))),
      dropped_given_up(DroppedFamily(r).Add(With(labels, "reason", "given_up"))),
      dropped_joining(DroppedFamily(r).Add(With(labels, "reason", "joining"))),
      dropped_repeated(DroppedFamily(r).Add(With(labels, "reason", "repeated"))),
      wait_seconds(AddCounter(r, "psflow_ps_aggregation_wait_seconds_total",
                              "Seconds pulls waited for a step to be aggregated (sync mode).",
                              labels)),
      checkpoints(AddCounter(r, "psflow_ps_checkpoints_written_total",
                             "Checkpoints written by this ps task.", labels)),
      staleness(AddStalenessHistogram(r, labels)),
      global_step(AddGauge(r, "psflow_ps_global_step", "This ps task's global step.", labels)),
      variable_bytes(AddGauge(r, "psflow_ps_variable_bytes",
                              "Bytes of variables this ps task holds.", labels)),
      learning_rate(
          AddGauge(r, "psflow_ps_learning_rate", "The optimizer's learning rate.", labels)),
      workers(AddGauge(r, "psflow_ps_workers",
                       "Workers this ps task counts on: joined, not left, and (sync) not given up.",
                       labels)),
      labels_(labels),
      partition_bytes_(prometheus::BuildGauge()
                           .Name("psflow_ps_partition_bytes")
                           .Help("Bytes of each variable partition this ps task holds.")
                           .Register(r)) {}

void PsMetrics::SetPartitionBytes(const std::string& partition, double bytes) {
  partition_bytes_.Add(With(labels_, "partition", partition)).Set(bytes);
}

}  // namespace psflow
