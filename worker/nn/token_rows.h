// The rows of an embedding table a batch of token ids touches: what an embedding layer's Prepare
// (worker/nn/layer.h) checks and reports on every backend.
#ifndef PSFLOW_WORKER_NN_TOKEN_ROWS_H_
#define PSFLOW_WORKER_NN_TOKEN_ROWS_H_

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

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_TOKEN_ROWS_H_
