#include "worker/evaluation.h"

#include <cmath>

#include "core/status_macros.h"
#include "worker/data/ptb.h"

namespace psflow {

absl::StatusOr<ClassifierEvaluation> EvaluateClassifier(nn::Model& model,
                                                        const data::Dataset& test) {
  double loss_sum = 0;
  int64_t correct = 0;
  absl::Status status;
  data::ForEachBatch(test, model.max_batch(), [&](const nn::Batch& batch) {
    if (!status.ok()) return;
    absl::StatusOr<nn::SoftmaxCrossEntropy::Eval> e = model.Evaluate(batch);
    if (!e.ok()) {
      status = e.status();
      return;
    }
    loss_sum += e->loss_sum;
    correct += e->correct;
  });
  RETURN_IF_ERROR(status);
  if (test.size() == 0) return ClassifierEvaluation{};
  return ClassifierEvaluation{loss_sum / test.size(), static_cast<double>(correct) / test.size()};
}

absl::StatusOr<double> EvaluatePerplexity(nn::Model& model, std::span<const int32_t> ids,
                                          int64_t batch_size, int64_t max_batches) {
  const int64_t steps = model.labels_per_example();
  ASSIGN_OR_RETURN(auto source, data::PtbSource::Create(ids, batch_size, steps));
  int64_t batches = source->batches_per_epoch();
  if (max_batches > 0) batches = std::min(batches, max_batches);
  model.ResetState();
  data::BatchBuffer buffer;
  double loss_sum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    source->Fill(buffer);
    ASSIGN_OR_RETURN(const nn::SoftmaxCrossEntropy::Eval e, model.Evaluate(buffer.view()));
    loss_sum += e.loss_sum;
  }
  model.ResetState();
  return std::exp(loss_sum / static_cast<double>(batches * batch_size * steps));
}

}  // namespace psflow
