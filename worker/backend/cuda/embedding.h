// Embedding lookup on a GPU, as the CPU layer (worker/backend/cpu/embedding.h): input [time]
// token ids (floats holding integers in [0, vocab_size)), output [time, dim]; parameter
// `<name>/embeddings` [vocab_size, dim] with spec.init, marked sparse.
//
// Prepare (the host phase) checks the ids in RunContext::host_input (the batch's ids before their
// copy to the device: the embedding is a model's first layer) and, in training, reports this
// step's rows, sorted and unique, with ParameterSet::SetTouchedRows: INVALID_ARGUMENT for an id
// outside the vocabulary, FAILED_PRECONDITION for a null host_input. Forward gathers the rows on
// the device (ids outside the vocabulary would give zero rows). Backward scatter-adds dy into the
// device gradient (atomicAdd: repeated ids add up, in no fixed order) and writes no dx (ids have
// no gradient). Neither reads the host or waits: both can be recorded into a graph. The host
// rows vector is reserved in Build: nothing is allocated later.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_EMBEDDING_H_
#define PSFLOW_WORKER_BACKEND_CUDA_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Embedding final : public nn::Layer {
 public:
  Embedding(Context& ctx, const nn::EmbeddingSpec& spec, std::string name);

  // INVALID_ARGUMENT for vocab_size or dim < 1 or an input that is not [time].
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  absl::Status Prepare(const nn::RunContext& ctx, int64_t rows) override;
  // The ids' rows, sorted and unique, as Prepare reports them.
  absl::Status ListRowsRead(const float* host_input, int64_t rows,
                            nn::ParameterSet& params) const override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  Context& ctx_;
  nn::EmbeddingSpec spec_;
  std::string where_;
  nn::ParameterSet::Handle table_ = -1;
  int64_t time_ = 0;           // ids per example
  std::vector<int64_t> rows_;  // this step's ids, sorted and unique (capacity kept)
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_EMBEDDING_H_
