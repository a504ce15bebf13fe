#include "worker/backend/cpu/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace psflow::cpu {
namespace {

// Writes softmax(row) into probs (may be null) and returns -log softmax(row)[label].
double RowLoss(const float* row, int64_t n, int32_t label, float* probs) {
  const float max = *std::max_element(row, row + n);
  double sum = 0.0;
  if (probs == nullptr) {
    for (int64_t c = 0; c < n; ++c) sum += std::exp(row[c] - max);
  } else {
    for (int64_t c = 0; c < n; ++c) sum += (probs[c] = std::exp(row[c] - max));
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < n; ++c) probs[c] *= inv;
  }
  return std::log(sum) - static_cast<double>(row[label] - max);
}

}  // namespace

double SoftmaxCrossEntropy::ForwardBackward(const nn::Matrix& logits, const int32_t* labels,
                                            float scale, const nn::Matrix& dlogits) {
  double total = 0.0;
  for (int64_t r = 0; r < logits.rows; ++r) {
    float* d = dlogits.row(r);
    total += RowLoss(logits.row(r), logits.cols, labels[r], d);
    // d(loss)/d(logit) = softmax - onehot
    d[labels[r]] -= 1.0f;
    for (int64_t c = 0; c < logits.cols; ++c) d[c] *= scale;
  }
  return total;
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
