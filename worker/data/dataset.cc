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

BatchSampler::BatchSampler(const Dataset& data, Range range, int64_t batch_size, uint64_t seed)
    : data_(data),
      range_(range),
      batch_size_(batch_size),
      rng_(seed),
      order_(static_cast<size_t>(range.size())),
      cursor_(range.size()) {  // shuffle before the first batch
  std::iota(order_.begin(), order_.end(), range.begin);
}

void BatchSampler::Fill(BatchBuffer& out) {
  if (cursor_ + batch_size_ > static_cast<int64_t>(order_.size())) {
    std::shuffle(order_.begin(), order_.end(), rng_);
    cursor_ = 0;
  }
  const int64_t width = data_.example_elements();
  out.inputs.resize(static_cast<size_t>(batch_size_ * width));
  out.labels.resize(static_cast<size_t>(batch_size_));
  out.size = batch_size_;
  for (int64_t i = 0; i < batch_size_; ++i) {
    const int64_t row = order_[static_cast<size_t>(cursor_ + i)];
    std::memcpy(out.inputs.data() + i * width, data_.inputs.data() + row * width,
                static_cast<size_t>(width) * sizeof(float));
    out.labels[static_cast<size_t>(i)] = data_.labels[static_cast<size_t>(row)];
  }
  cursor_ += batch_size_;
}

}  // namespace psflow::data
