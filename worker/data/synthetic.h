// `--data_source synthetic`: batches of the right shape with random contents, for throughput
// measurements without a dataset (as tf_cnn_benchmarks' synthetic data). Nothing is learned.
#ifndef PSFLOW_WORKER_DATA_SYNTHETIC_H_
#define PSFLOW_WORKER_DATA_SYNTHETIC_H_

#include <cstdint>
#include <random>

#include "worker/data/batch_source.h"

namespace psflow::data {

struct SyntheticShape {
  int64_t example_elements = 0;    // floats per example
  int64_t labels_per_example = 1;  // time steps for a language model
  int num_classes = 0;             // labels in [0, num_classes)
  int vocab_size = 0;              // > 0: inputs are token ids in [0, vocab_size), else U[0, 1)
  int64_t batches_per_epoch = 100;
};

class SyntheticSource final : public BatchSource {
 public:
  SyntheticSource(SyntheticShape shape, int64_t batch_size, uint64_t seed);

  int64_t batches_per_epoch() const override { return shape_.batches_per_epoch; }
  void Fill(BatchBuffer& out) override;

 private:
  SyntheticShape shape_;
  int64_t batch_size_;
  std::mt19937_64 rng_;
};

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_SYNTHETIC_H_
