// What every backend checks of a batch's host data in a step's host phase (worker/nn/layer.h),
// before any device work: an embedding's token ids (and the rows they touch), the labels.
#ifndef PSFLOW_WORKER_NN_BATCH_CHECKS_H_
#define PSFLOW_WORKER_NN_BATCH_CHECKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow::nn {

// rows := the `count` host ids (floats holding integers), sorted and unique (its capacity is kept:
// reserve count once and nothing is allocated). INVALID_ARGUMENT naming `layer`, the id and its
// position when an id is not an integer in [0, vocab).
absl::Status CollectTokenRows(absl::string_view layer, const float* ids, int64_t count,
                              int64_t vocab, std::vector<int64_t>& rows);

// OK when each of the `rows` labels is in [0, classes); else INVALID_ARGUMENT naming `where`
// (the loss and its shapes), the label and its row.
absl::Status CheckLabels(absl::string_view where, const int32_t* labels, int64_t rows,
                         int64_t classes);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_BATCH_CHECKS_H_
