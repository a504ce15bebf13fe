// What a trained model is judged by: a classifier's test accuracy, a language model's perplexity.
#ifndef PSFLOW_WORKER_EVALUATION_H_
#define PSFLOW_WORKER_EVALUATION_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "worker/data/dataset.h"
#include "worker/nn/model.h"

namespace psflow {

struct ClassifierEvaluation {
  double loss = 0;  // mean cross-entropy
  double accuracy = 0;
};

// Every example of `test`, in batches of the model's max_batch.
absl::StatusOr<ClassifierEvaluation> EvaluateClassifier(nn::Model& model,
                                                        const data::Dataset& test);

// exp(mean cross-entropy per word) over `ids`, batched as ptb_producer does with batch_size x
// the model's time steps, the LSTM state carried from zeros through the whole pass (the seed's
// run_epoch without training). max_batches > 0 stops early. INVALID_ARGUMENT when ids hold
// less than one batch.
absl::StatusOr<double> EvaluatePerplexity(nn::Model& model, std::span<const int32_t> ids,
                                          int64_t batch_size, int64_t max_batches = 0);

}  // namespace psflow

#endif  // PSFLOW_WORKER_EVALUATION_H_
