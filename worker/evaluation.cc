#include "worker/evaluation.h"

#include <cmath>

#include "core/status_macros.h"
#include "worker/data/ptb.h"

namespace psflow {

ClassifierEvaluation EvaluateClassifier(nn::Model& model, const data::Dataset& test) {
  double loss_sum = 0;
  int64_t correct = 0;
  data::ForEachBatch(test, model.max_batch(), [&](const nn::Batch& batch) {
    const auto e = model.Evaluate(batch);
    loss_sum += e.loss_sum;
    correct += e.correct;
  });
  if (test.size() == 0) return {};
  return {loss_sum / test.size(), static_cast<double>(correct) / test.size()};
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
    loss_sum += model.Evaluate(buffer.view()).loss_sum;
  }
  model.ResetState();
  return std::exp(loss_sum / static_cast<double>(batches * batch_size * steps));
}

}  // namespace psflow
