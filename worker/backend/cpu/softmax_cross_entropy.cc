#include "worker/backend/cpu/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/status_macros.h"
#include "worker/backend/cpu/vector_math.h"
#include "worker/nn/batch_checks.h"

namespace psflow::cpu {
namespace {

// Rows per thread's range: a PTB logits row is 10,000 classes, an MNIST one 10.
constexpr int64_t kRowFloatsPerRange = 16384;

// -log softmax(row)[label]; probs becomes scale * (softmax(row) - onehot(label)): the loss's
// gradient.
double RowLoss(const float* row, int64_t n, int32_t label, float* probs, float scale) {
  const float max = MaxOf(row, n);
  ExpOf(row, n, max, probs);
  // In double: a loss precise enough for finite-difference checks of small gradients.
  const double sum = SumOf(probs, n);
  const float factor = static_cast<float>(scale / sum);
  for (int64_t i = 0; i < n; ++i) probs[i] *= factor;
  probs[label] -= scale;
  return std::log(sum) - static_cast<double>(row[label] - max);
}

int64_t RowsPerRange(int64_t cols) { return std::max<int64_t>(1, kRowFloatsPerRange / cols); }

}  // namespace

absl::Status SoftmaxCrossEntropy::SetLabels(const int32_t* labels, int64_t rows, int64_t classes) {
  RETURN_IF_ERROR(nn::CheckLabels("softmax cross-entropy", labels, rows, classes));
  labels_ = labels;
  return absl::OkStatus();
}

void SoftmaxCrossEntropy::ForwardBackward(const nn::Matrix& logits, float scale,
                                          const nn::Matrix& dlogits) {
  row_loss_.resize(static_cast<size_t>(logits.rows));
  ParallelFor(pool_, logits.rows, RowsPerRange(logits.cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      row_loss_[r] = RowLoss(logits.row(r), logits.cols, labels_[r], dlogits.row(r), scale);
    }
  });
  loss_ = 0.0;
  for (double l : row_loss_) loss_ += l;
}

SoftmaxCrossEntropy::Eval SoftmaxCrossEntropy::Evaluate(const nn::Matrix& logits,
                                                        const int32_t* labels) {
  // One thread, no buffer: evaluation is off the training step's path, and allocates nothing.
  Eval e;
  for (int64_t r = 0; r < logits.rows; ++r) {
    const float* row = logits.row(r);
    const float max = MaxOf(row, logits.cols);
    e.loss_sum +=
        std::log(SumOfExp(row, logits.cols, max)) - static_cast<double>(row[labels[r]] - max);
    if (std::max_element(row, row + logits.cols) - row == labels[r]) ++e.correct;
  }
  return e;
}

}  // namespace psflow::cpu
