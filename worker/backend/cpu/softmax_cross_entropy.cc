#include "worker/backend/cpu/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "core/status_macros.h"
#include "worker/nn/batch_checks.h"

namespace psflow::cpu {
namespace {

// -log softmax(row)[label]; when probs is non-null also writes
// scale * (softmax(row) - onehot(label)) into it: the loss's gradient, in one pass after the sum.
double RowLoss(const float* row, int64_t n, int32_t label, float* probs, float scale) {
  float max = row[0];
  for (int64_t c = 1; c < n; ++c) max = std::max(max, row[c]);
  // Eight partial sums in double: independent chains (vectorisable), and a loss precise enough
  // for finite-difference checks of small gradients.
  double partial[8] = {};
  int64_t c = 0;
  if (probs == nullptr) {
    for (; c + 8 <= n; c += 8) {
      for (int k = 0; k < 8; ++k) partial[k] += std::exp(row[c + k] - max);
    }
    for (; c < n; ++c) partial[0] += std::exp(row[c] - max);
  } else {
    for (; c + 8 <= n; c += 8) {
      for (int k = 0; k < 8; ++k) partial[k] += (probs[c + k] = std::exp(row[c + k] - max));
    }
    for (; c < n; ++c) partial[0] += (probs[c] = std::exp(row[c] - max));
  }
  double sum = 0;
  for (double p : partial) sum += p;
  if (probs != nullptr) {
    const float factor = static_cast<float>(scale / sum);
    for (int64_t i = 0; i < n; ++i) probs[i] *= factor;
    probs[label] -= scale;
  }
  return std::log(sum) - static_cast<double>(row[label] - max);
}

}  // namespace

absl::Status SoftmaxCrossEntropy::SetLabels(const int32_t* labels, int64_t rows, int64_t classes) {
  RETURN_IF_ERROR(nn::CheckLabels("softmax cross-entropy", labels, rows, classes));
  labels_ = labels;
  return absl::OkStatus();
}

void SoftmaxCrossEntropy::ForwardBackward(const nn::Matrix& logits, float scale,
                                          const nn::Matrix& dlogits) {
  loss_ = 0.0;
  for (int64_t r = 0; r < logits.rows; ++r) {
    loss_ += RowLoss(logits.row(r), logits.cols, labels_[r], dlogits.row(r), scale);
  }
}

SoftmaxCrossEntropy::Eval SoftmaxCrossEntropy::Evaluate(const nn::Matrix& logits,
                                                        const int32_t* labels) {
  Eval e;
  for (int64_t r = 0; r < logits.rows; ++r) {
    const float* row = logits.row(r);
    e.loss_sum += RowLoss(row, logits.cols, labels[r], nullptr, 0.0f);
    if (std::max_element(row, row + logits.cols) - row == labels[r]) ++e.correct;
  }
  return e;
}

}  // namespace psflow::cpu
