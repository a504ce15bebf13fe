#include "worker/backend/cpu/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace psflow::cpu {
namespace {

// Writes softmax(row) into probs (may be null) and returns -log softmax(row)[label].
double RowLoss(const float* row, int64_t n, int32_t label, float* probs) {
  const float max = *std::max_element(row, row + n);
  double sum = 0.0;
  for (int64_t c = 0; c < n; ++c) sum += std::exp(static_cast<double>(row[c] - max));
  if (probs != nullptr) {
    for (int64_t c = 0; c < n; ++c) {
      probs[c] = static_cast<float>(std::exp(static_cast<double>(row[c] - max)) / sum);
    }
  }
  return std::log(sum) - static_cast<double>(row[label] - max);
}

}  // namespace

float SoftmaxCrossEntropy::ForwardBackward(const nn::Matrix& logits, const int32_t* labels,
                                           const nn::Matrix& dlogits) {
  const double inv_batch = 1.0 / static_cast<double>(logits.rows);
  double total = 0.0;
  for (int64_t r = 0; r < logits.rows; ++r) {
    float* d = dlogits.row(r);
    total += RowLoss(logits.row(r), logits.cols, labels[r], d);
    // d(mean loss)/d(logit) = (softmax - onehot) / batch
    d[labels[r]] -= 1.0f;
    for (int64_t c = 0; c < logits.cols; ++c) d[c] = static_cast<float>(d[c] * inv_batch);
  }
  return static_cast<float>(total * inv_batch);
}

SoftmaxCrossEntropy::Eval SoftmaxCrossEntropy::Evaluate(const nn::Matrix& logits,
                                                        const int32_t* labels) {
  Eval e;
  for (int64_t r = 0; r < logits.rows; ++r) {
    const float* row = logits.row(r);
    e.loss_sum += RowLoss(row, logits.cols, labels[r], nullptr);
    if (std::max_element(row, row + logits.cols) - row == labels[r]) ++e.correct;
  }
  return e;
}

}  // namespace psflow::cpu
