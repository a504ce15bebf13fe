#include "worker/nn/batch_checks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psflow::nn {

absl::Status CollectTokenRows(absl::string_view layer, const float* ids, int64_t count,
                              int64_t vocab, std::vector<int64_t>& rows) {
  rows.clear();
  for (int64_t i = 0; i < count; ++i) {
    const float id = ids[i];
    // Also refuses NaN and fractions: the float must be exactly the integer it names.
    if (!(id >= 0 && id < static_cast<float>(vocab)) ||
        static_cast<float>(static_cast<int64_t>(id)) != id) {
      return absl::InvalidArgumentError(absl::StrCat(layer, ": token id ", id, " at position ", i,
                                                     " is outside the vocabulary [0, ", vocab,
                                                     ")"));
    }
    rows.push_back(static_cast<int64_t>(id));
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return absl::OkStatus();
}

absl::Status CheckLabels(absl::string_view where, const int32_t* labels, int64_t rows,
                         int64_t classes) {
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0 || labels[r] >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": label ", labels[r], " of row ", r,
                                                     " is outside [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace psflow::nn
