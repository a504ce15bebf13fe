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
      cursor_(range.size()),  // shuffle before the first batch
      inputs_(static_cast<size_t>(batch_size * data.example_elements())),
      labels_(static_cast<size_t>(batch_size)) {
  std::iota(order_.begin(), order_.end(), range.begin);
}

nn::Batch BatchSampler::Next() {
  if (cursor_ + batch_size_ > static_cast<int64_t>(order_.size())) {
    std::shuffle(order_.begin(), order_.end(), rng_);
    cursor_ = 0;
  }
  const int64_t width = data_.example_elements();
  for (int64_t i = 0; i < batch_size_; ++i) {
    const int64_t row = order_[static_cast<size_t>(cursor_ + i)];
    std::memcpy(inputs_.data() + i * width, data_.inputs.data() + row * width,
                static_cast<size_t>(width) * sizeof(float));
    labels_[static_cast<size_t>(i)] = data_.labels[static_cast<size_t>(row)];
  }
  cursor_ += batch_size_;
  return nn::Batch{inputs_.data(), labels_.data(), batch_size_};
}

}  // namespace psflow::data
