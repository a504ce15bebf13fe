#include "worker/worker_metrics.h"

namespace psflow {
namespace {

prometheus::Counter& PhaseCounter(prometheus::Family<prometheus::Counter>& family, Labels labels,
                                  const char* phase) {
  labels["phase"] = phase;
  return family.Add(labels);
}

prometheus::Family<prometheus::Counter>& PhaseFamily(prometheus::Registry& r) {
  return prometheus::BuildCounter()
      .Name("psflow_worker_step_phase_seconds_total")
      .Help("Seconds of training steps by phase: pull, compute, push, wait (for input).")
      .Register(r);
}

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& r, const Labels& labels, std::mutex* together)
    : examples(
          AddCounter(r, "psflow_worker_examples_total", "Training examples processed.", labels)),
      words(AddCounter(r, "psflow_worker_words_total",
                       "Words (time steps) trained on, for language models.", labels)),
      steps(AddCounter(r, "psflow_worker_steps_total", "Training steps completed.", labels)),
      train_steps(AddGauge(r, "psflow_worker_train_steps",
                           "Steps this worker trains in all: --train_steps, or its epochs times "
                           "the batches in one epoch of its shard; with --train_seconds, the "
                           "steps its rate so far fits in the budget.",
                           labels)),
      step_time(
          prometheus::BuildHistogram()
              .Name("psflow_worker_step_duration_seconds")
              .Help("Wall time of one training step: pull, compute and push.")
              .Register(r)
              .Add(labels, prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005,
                                                                   0.01, 0.025, 0.05, 0.1, 0.25,
                                                                   0.5, 1, 2.5, 5, 10})),
      loss(LateGauge(r, "psflow_worker_loss", "Mean training loss of the last step.", labels)),
      skipped_steps(AddCounter(r, "psflow_worker_skipped_steps_total",
                               "Steps whose gradients were not all finite: not pushed.", labels)),
      loss_scale(AddGauge(r, "psflow_worker_loss_scale",
                          "What the loss's gradient is multiplied by before backward (1: none).",
                          labels)),
      pushed_bytes(AddCounter(r, "psflow_worker_pushed_bytes_total",
                              "Gradient tensor bytes pushed to the ps tasks.", labels)),
      pulled_bytes(AddCounter(r, "psflow_worker_pulled_bytes_total",
                              "Parameter tensor bytes pulled from the ps tasks.", labels)),
      global_step(AddGauge(r, "psflow_worker_global_step",
                           "Global step as last reported by the ps.", labels)),
      test_accuracy(LateGauge(r, "psflow_worker_test_accuracy_ratio",
                              "Accuracy on the test set after training (0..1).", labels)),
      test_perplexity(LateGauge(r, "psflow_worker_test_perplexity",
                                "Language models: perplexity on the test set after training.",
                                labels)),
      replayed_step(AddGauge(r, "psflow_worker_replayed_step_seconds",
                             "--compute=replay: seconds a step sleeps instead of computing (its "
                             "gradients are the first step's); 0 when steps compute for real.",
                             labels)),
      step_phases(PhaseFamily(r)),
      pull_seconds(PhaseCounter(step_phases, labels, "pull")),
      compute_seconds(PhaseCounter(step_phases, labels, "compute")),
      push_seconds(PhaseCounter(step_phases, labels, "push")),
      input_wait_seconds(PhaseCounter(step_phases, labels, "wait")),
      together_(together) {}

}  // namespace psflow
