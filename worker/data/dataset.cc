#include "worker/data/dataset.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace psflow::data {

Range ShardRange(int64_t n, int index, int count) {
  const int64_t base = n / count, extra = n % count;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

EpochOrder::EpochOrder(Range range, int64_t batch_size, uint64_t seed)
    : range_(range),
      batch_size_(batch_size),
      rng_(seed),
      order_(static_cast<size_t>(range.size())),
      cursor_(range.size()) {  // shuffle before the first batch
  std::iota(order_.begin(), order_.end(), range.begin);
}

std::span<const int64_t> EpochOrder::Next() {
  if (cursor_ + batch_size_ > static_cast<int64_t>(order_.size())) {
    std::shuffle(order_.begin(), order_.end(), rng_);
    cursor_ = 0;
  }
  const std::span<const int64_t> rows(order_.data() + cursor_, static_cast<size_t>(batch_size_));
  cursor_ += batch_size_;
  return rows;
}

BatchSampler::BatchSampler(const Dataset& data, Range range, int64_t batch_size, uint64_t seed)
    : data_(data), order_(range, batch_size, seed) {}

void BatchSampler::Fill(BatchBuffer& out) {
  const int64_t width = data_.example_elements();
  const int64_t n = order_.batch_size();
  out.inputs.resize(static_cast<size_t>(n * width));
  out.labels.resize(static_cast<size_t>(n));
  out.size = n;
  const std::span<const int64_t> rows = order_.Next();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = rows[static_cast<size_t>(i)];
    std::memcpy(out.inputs.data() + i * width, data_.inputs.data() + row * width,
                static_cast<size_t>(width) * sizeof(float));
    out.labels[static_cast<size_t>(i)] = data_.labels[static_cast<size_t>(row)];
  }
}

}  // namespace psflow::data
