// Embedding lookup on the CPU: rows gathered by token id; the gradient is scattered into the
// touched rows only and reported as sparse (ParameterSet::SetTouchedRows, by Prepare in
// training: the ids are checked and the rows collected in the host phase, as on a GPU).
#ifndef PSFLOW_WORKER_BACKEND_CPU_EMBEDDING_H_
#define PSFLOW_WORKER_BACKEND_CPU_EMBEDDING_H_

#include <vector>

#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Embedding final : public nn::Layer {
 public:
  Embedding(const nn::EmbeddingSpec& spec, std::string name)
      : Layer(std::move(name)), spec_(spec) {}

  // Input [time] token ids (floats holding integers in [0, vocab_size)); output [time, dim].
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  // INVALID_ARGUMENT naming the layer for an id outside the vocabulary.
  absl::Status Prepare(const nn::RunContext& ctx, int64_t rows) override;
  // The ids' rows, sorted and unique, as Prepare reports them.
  absl::Status ListRowsRead(const float* host_input, int64_t rows,
                            nn::ParameterSet& params) const override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  nn::EmbeddingSpec spec_;
  nn::ParameterSet::Handle table_ = -1;
  int64_t time_ = 0;           // ids per example
  std::vector<int64_t> rows_;  // this step's ids, sorted and unique (capacity kept)
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_EMBEDDING_H_
