#include "worker/evaluator.h"

#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "worker/evaluation.h"

namespace psflow {

absl::Status RunEvaluator(nn::Model& model, ParameterSync& sync, const WorkerInput& input,
                          const EvaluatorOptions& options, WorkerMetrics* metrics) {
  if (!input.test.has_value() && !input.corpus.has_value()) {
    return absl::FailedPreconditionError(
        "an evaluator needs a test split: --data_source=synthetic has none");
  }
  RETURN_IF_ERROR(sync.Prepare(model.params(), /*is_chief=*/false));
  int64_t evaluated_step = -1;
  for (;;) {
    absl::StatusOr<SyncResult> pulled = sync.Pull(model.params());
    if (!pulled.ok()) {
      if (evaluated_step < 0 || !absl::IsUnavailable(pulled.status())) return pulled.status();
      PSFLOW_LOG(INFO) << options.name << ": the ps tasks are gone, training is over; last "
                       << "evaluation at global step " << evaluated_step;
      return absl::OkStatus();
    }
    if (pulled->global_step != evaluated_step) {
      std::string figures;
      if (input.test.has_value()) {
        ASSIGN_OR_RETURN(const ClassifierEvaluation e, EvaluateClassifier(model, *input.test));
        if (metrics != nullptr) metrics->test_accuracy.Set(e.accuracy);
        figures = absl::StrFormat("test_loss=%.4f test_accuracy=%.4f", e.loss, e.accuracy);
      } else {
        ASSIGN_OR_RETURN(
            const double perplexity,
            EvaluatePerplexity(model, input.corpus->test, model.max_batch(), options.eval_steps));
        if (metrics != nullptr) metrics->test_perplexity.Set(perplexity);
        figures = absl::StrFormat("test_perplexity=%.3f", perplexity);
      }
      if (metrics != nullptr) metrics->global_step.Set(static_cast<double>(pulled->global_step));
      PSFLOW_LOG(INFO) << absl::StrFormat("%s: global_step=%d %s", options.name,
                                          pulled->global_step, figures);
      evaluated_step = pulled->global_step;
    }
    absl::SleepFor(options.interval);
  }
}

}  // namespace psflow
