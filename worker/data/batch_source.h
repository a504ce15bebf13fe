// Where training batches come from: a BatchSource writes batch after batch into host buffers; the
// Prefetcher (prefetcher.h) runs one on a background thread so the training step never waits
// for input preparation (decoding, augmentation, shuffling).
#ifndef PSFLOW_WORKER_DATA_BATCH_SOURCE_H_
#define PSFLOW_WORKER_DATA_BATCH_SOURCE_H_

#include <cstdint>
#include <vector>

#include "worker/nn/model.h"

namespace psflow::data {

// One batch in host memory, reused from step to step.
struct BatchBuffer {
  std::vector<float> inputs;    // size * elements per example
  std::vector<int32_t> labels;  // size * labels per example
  int64_t size = 0;             // examples (rows)

  nn::Batch view() const { return nn::Batch{inputs.data(), labels.data(), size}; }
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  // Batches in one pass over the data this source draws from (>= 1).
  virtual int64_t batches_per_epoch() const = 0;

  // Writes the next batch into `out`. The sequence is fixed by the source's construction
  // (seeded), so runs repeat. A buffer is resized on its first use only: the steady state
  // allocates nothing. Called from one thread at a time.
  virtual void Fill(BatchBuffer& out) = 0;
};

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_BATCH_SOURCE_H_
