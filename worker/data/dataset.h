// An in-memory labelled dataset, the shard of it a worker owns, and batches drawn from that shard.
#ifndef PSFLOW_WORKER_DATA_DATASET_H_
#define PSFLOW_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "worker/data/batch_source.h"
#include "worker/nn/model.h"

namespace psflow::data {

struct Dataset {
  nn::Shape example_shape;      // e.g. {784}
  std::vector<float> inputs;    // size() * NumElements(example_shape), row-major
  std::vector<int32_t> labels;  // size()
  int num_classes = 0;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t example_elements() const { return nn::NumElements(example_shape); }
};

// [begin, end) of worker `index` of `count`: the index-th contiguous 1/count of n examples; the
// first n % count shards get one extra example.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
Range ShardRange(int64_t n, int index, int count);

// The rows [range.begin, range.end) in a fresh random order each epoch (seeded, so runs repeat),
// handed out batch_size at a time: an epoch is range.size() / batch_size batches; the rows left
// over take part in the next epoch's shuffle.
class EpochOrder {
 public:
  // batch_size in [1, range.size()].
  EpochOrder(Range range, int64_t batch_size, uint64_t seed);

  int64_t batches_per_epoch() const { return range_.size() / batch_size_; }
  int64_t batch_size() const { return batch_size_; }
  // The rows of the next batch; valid until the next call.
  std::span<const int64_t> Next();
  // The generator the order is drawn from, for per-example randomness (augmentation) drawn in
  // the same deterministic stream.
  std::mt19937_64& rng() { return rng_; }

 private:
  Range range_;
  int64_t batch_size_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  int64_t cursor_ = 0;
};

// Draws fixed-size batches from rows [range.begin, range.end) of a dataset in an EpochOrder.
class BatchSampler final : public BatchSource {
 public:
  // data must outlive the sampler; batch_size in [1, range.size()].
  BatchSampler(const Dataset& data, Range range, int64_t batch_size, uint64_t seed);

  int64_t batches_per_epoch() const override { return order_.batches_per_epoch(); }
  void Fill(BatchBuffer& out) override;

 private:
  const Dataset& data_;
  EpochOrder order_;
};

// Consecutive batches of rows [0, data.size()) in order, the last one possibly smaller: for
// evaluation. Calls fn(const nn::Batch&) for each.
template <class Fn>
void ForEachBatch(const Dataset& data, int64_t batch_size, Fn&& fn) {
  for (int64_t b = 0; b < data.size(); b += batch_size) {
    const int64_t n = std::min(batch_size, data.size() - b);
    fn(nn::Batch{data.inputs.data() + b * data.example_elements(), data.labels.data() + b, n});
  }
}

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_DATASET_H_
