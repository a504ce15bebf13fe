// The Evaluator replica (TFJob's Evaluator): follows a training job from the side. Every
// `interval` it pulls the latest parameters from the ps tasks, and when the global step moved it
// evaluates them on the test split (a classifier's accuracy and loss, a language model's
// perplexity over at most `eval_steps` batches) and reports the figures with the global step
// they belong to: one log line each, and the worker gauges psflow_worker_test_accuracy_ratio /
// psflow_worker_test_perplexity and psflow_worker_global_step (labelled replica_type
// "evaluator"). It never pushes: training neither waits for it nor sees it, and it never
// decides the job's outcome (api/job_policy.h).
//
// It runs until the ps tasks are gone after at least one evaluation (the job ended and stopped
// them: OK), or an error: a ps that never became ready, an evaluation that failed.
#ifndef PSFLOW_WORKER_EVALUATOR_H_
#define PSFLOW_WORKER_EVALUATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/nn/model.h"
#include "worker/parameter_sync.h"
#include "worker/worker_input.h"
#include "worker/worker_metrics.h"

namespace psflow {

struct EvaluatorOptions {
  absl::Duration interval = absl::Seconds(30);
  int64_t eval_steps = 0;  // language models: batches per evaluation (0: the whole test split)
  std::string name = "evaluator 0";  // the log lines' prefix
};

// `sync` must talk to the job's ps tasks (Prepare waits for the chief to initialise them).
// `metrics` may be null.
absl::Status RunEvaluator(nn::Model& model, ParameterSync& sync, const WorkerInput& input,
                          const EvaluatorOptions& options, WorkerMetrics* metrics);

}  // namespace psflow

#endif  // PSFLOW_WORKER_EVALUATOR_H_
