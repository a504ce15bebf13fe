#include "worker/data/synthetic.h"

namespace psflow::data {

SyntheticSource::SyntheticSource(SyntheticShape shape, int64_t batch_size, uint64_t seed)
    : shape_(shape), batch_size_(batch_size), rng_(seed) {}

void SyntheticSource::Fill(BatchBuffer& out) {
  out.inputs.resize(static_cast<size_t>(batch_size_ * shape_.example_elements));
  out.labels.resize(static_cast<size_t>(batch_size_ * shape_.labels_per_example));
  out.size = batch_size_;
  for (float& x : out.inputs) {
    const uint64_t r = rng_();
    x = shape_.vocab_size > 0 ? static_cast<float>(r % static_cast<uint64_t>(shape_.vocab_size))
                              : static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
  }
  for (int32_t& y : out.labels) {
    y = static_cast<int32_t>(rng_() % static_cast<uint64_t>(shape_.num_classes));
  }
}

}  // namespace psflow::data
