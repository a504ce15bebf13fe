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

// -log softmax(row)[label], with softmax(row) written into probs (n floats of scratch when the
// caller wants no gradient). With `gradient`, probs then becomes
// scale * (softmax(row) - onehot(label)): the loss's gradient.
double RowLoss(const float* row, int64_t n, int32_t label, float* probs, bool gradient,
               float scale) {
  const float max = MaxOf(row, n);
  ExpOf(row, n, max, probs);
  // In double: a loss precise enough for finite-difference checks of small gradients.
  const double sum = SumOf(probs, n);
  if (gradient) {
    const float factor = static_cast<float>(scale / sum);
    for (int64_t i = 0; i < n; ++i) probs[i] *= factor;
    probs[label] -= scale;
  }
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
      row_loss_[r] = RowLoss(logits.row(r), logits.cols, labels_[r], dlogits.row(r), true, scale);
    }
  });
  loss_ = 0.0;
  for (double l : row_loss_) loss_ += l;
}

SoftmaxCrossEntropy::Eval SoftmaxCrossEntropy::Evaluate(const nn::Matrix& logits,
                                                        const int32_t* labels) {
  row_loss_.resize(static_cast<size_t>(logits.rows));
  row_correct_.resize(static_cast<size_t>(logits.rows));
  ParallelFor(pool_, logits.rows, RowsPerRange(logits.cols), [&](int64_t begin, int64_t end) {
    // Per thread, one row of probabilities; sized once.
    thread_local std::vector<float> probs;
    if (probs.size() < static_cast<size_t>(logits.cols)) probs.resize(logits.cols);
    for (int64_t r = begin; r < end; ++r) {
      const float* row = logits.row(r);
      row_loss_[r] = RowLoss(row, logits.cols, labels[r], probs.data(), false, 0.0f);
      row_correct_[r] = std::max_element(row, row + logits.cols) - row == labels[r];
    }
  });
  Eval e;
  for (int64_t r = 0; r < logits.rows; ++r) {
    e.loss_sum += row_loss_[r];
    e.correct += row_correct_[r];
  }
  return e;
}

}  // namespace psflow::cpu
