// The overlapped exchange's hand-over on a GPU (background_exchange.h): the CUDA backend keeps a
// model's host values and gradients in pinned memory, the exchange's second buffer pair is pinned
// with them, and a hand-over that swaps the pairs trains exactly as one that copies them: the
// backend's copies follow the buffers the set holds at each step. Needs a GPU: every test skips,
// saying why, where none is visible (this machine, CI).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "worker/backend/cuda/forced_lstm_path.h"
#include "worker/models/reference_models.h"
#include "worker/nn/backend.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/model.h"
#include "worker/overlapped_sync.h"

namespace psflow::nn {
namespace {

bool Pinned(const float* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

// A ps in memory: plain SGD on master values (dense parameters whole, sparse ones in their
// touched rows); Pull copies them out.
class SgdSync final : public ParameterSync {
 public:
  absl::Status Prepare(const ParameterSet& params, bool) override {
    master_.assign(params.values().begin(), params.values().end());
    return absl::OkStatus();
  }
  absl::StatusOr<SyncResult> Pull(ParameterSet& params) override {
    std::copy(master_.begin(), master_.end(), params.values().begin());
    params.ValuesChanged();
    return SyncResult{.global_step = step_};
  }
  absl::StatusOr<SyncResult> Push(ParameterSet& params, int64_t) override {
    for (const ParameterDesc& d : params.descs()) {
      const auto apply = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          master_[static_cast<size_t>(i)] -= 0.1f * params.grads()[static_cast<size_t>(i)];
        }
      };
      if (!d.sparse) {
        apply(d.offset, d.offset + d.size);
        continue;
      }
      for (const int64_t r : d.touched_rows) {
        apply(d.offset + r * d.row_width(), d.offset + (r + 1) * d.row_width());
      }
    }
    return SyncResult{.global_step = ++step_};
  }
  absl::Status SetLearningRate(float) override { return absl::OkStatus(); }
  absl::Status Leave() override { return absl::OkStatus(); }
  const std::vector<float>& master() const { return master_; }

 private:
  std::vector<float> master_;
  int64_t step_ = 0;
};

TEST(GpuHandOver, TheModelsHostBuffersAndTheExchangesArePinned) {
  absl::StatusOr<std::unique_ptr<Backend>> gpu = MakeCudaBackend(0);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU to test on: " << gpu.status().message();
  auto model = Model::Create(models::MnistMlp(), **gpu, 32);
  ASSERT_TRUE(model.ok()) << model.status();
  ParameterSet& p = (*model)->params();
  EXPECT_TRUE(Pinned(p.values().data()));
  EXPECT_TRUE(Pinned(p.grads().data()));
  const std::unique_ptr<ParameterSet> second = ParameterSet::SameLayoutAs(p);
  EXPECT_TRUE(Pinned(second->values().data()));
  EXPECT_TRUE(Pinned(second->grads().data()));
  EXPECT_EQ(second->host_memory(), p.host_memory());
}

struct HandOverCase {
  const char* name;
  ModelSpec (*spec)();
  int64_t batch;
  float clip_norm;  // 0: backward streams each layer's gradients to the host buffer
  bool graphs;      // --cuda_graphs: a step whose gradient buffer is not the recorded one runs
                    // eagerly (Model::EnableGraphs)
};
void PrintTo(const HandOverCase& c, std::ostream* os) { *os << c.name; }

class GpuHandOverModel : public testing::TestWithParam<HandOverCase> {};

// The same model, seeds and batches, eight overlapped steps through the same in-memory ps with
// each hand-over: the ps's values agree (within what the order of the GPU's atomic sums moves
// them), and the swapping run did swap (the host buffers alternate). With CUDA graphs: a graph
// that streams per layer was recorded with one gradient buffer, so every other swapped step runs
// eagerly; one that clips copies after the replay, wherever the buffer is.
TEST_P(GpuHandOverModel, SwappingTrainsAsCopying) {
  const HandOverCase& c = GetParam();
  absl::StatusOr<std::unique_ptr<Backend>> gpu = MakeCudaBackend(0);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU to test on: " << gpu.status().message();
  const ModelSpec spec = c.spec();
  std::vector<std::vector<float>> trained;
  for (const HandOver hand_over : {HandOver::kCopy, HandOver::kSwap}) {
    SCOPED_TRACE(hand_over == HandOver::kSwap ? "swapped" : "copied");
    auto model = Model::Create(spec, **gpu, c.batch, /*seed=*/3);
    if (const std::string why = ForcedLstmPathRefused(model.status()); !why.empty()) {
      GTEST_SKIP() << why;
    }
    ASSERT_TRUE(model.ok()) << model.status();
    if (c.graphs) (*model)->EnableGraphs();
    ParameterSet& p = (*model)->params();
    p.Initialize(5);
    SgdSync ps;
    OverlappedSync sync(ps, p, hand_over);
    ASSERT_TRUE(sync.Prepare(p, true).ok());
    std::vector<const float*> grads_buffers;
    const int vocab = (*model)->labels_per_example() > 1 ? spec.num_classes : 0;
    for (uint64_t step = 0; step < 8; ++step) {
      ASSERT_TRUE(sync.Pull(p).ok());
      const GradientCheckInput in =
          RandomInput(spec, c.batch, (*model)->labels_per_example(), 60 + step, vocab);
      const Batch b{in.inputs.data(), in.labels.data(), c.batch};
      absl::StatusOr<double> loss = (*model)->ComputeGradients(b, c.clip_norm);
      ASSERT_TRUE(loss.ok()) << loss.status();
      grads_buffers.push_back(p.grads().data());
      ASSERT_TRUE(sync.Push(p, c.batch).ok());
      EXPECT_TRUE(Pinned(p.values().data()) && Pinned(p.grads().data())) << "step " << step;
    }
    ASSERT_TRUE(sync.Flush(p).ok());
    if (c.graphs) {
      EXPECT_EQ((*model)->graph_state(), Model::GraphState::kReplaying);
    }
    if (hand_over == HandOver::kSwap) {
      EXPECT_NE(grads_buffers[0], grads_buffers[1]);
      EXPECT_EQ(grads_buffers[0], grads_buffers[2]);
    } else {
      EXPECT_EQ(grads_buffers[0], grads_buffers[1]);
    }
    trained.push_back(ps.master());
  }
  double largest = 0, worst = 0;
  for (size_t i = 0; i < trained[0].size(); ++i) {
    largest = std::max(largest, std::fabs(static_cast<double>(trained[0][i])));
    worst = std::max(worst, std::fabs(static_cast<double>(trained[1][i]) - trained[0][i]));
  }
  EXPECT_LE(worst, 1e-5 * std::max(1.0, largest)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    GpuHandOver, GpuHandOverModel,
    testing::Values(HandOverCase{"mnist_cnn_streamed", models::MnistCnn, 32, 0, false},
                    HandOverCase{"mnist_cnn_streamed_graphs", models::MnistCnn, 32, 0, true},
                    HandOverCase{"ptb_clipped", [] { return SmallVocabularyPtb(); }, 20, 5, false},
                    HandOverCase{"ptb_clipped_graphs", [] { return SmallVocabularyPtb(); }, 20, 5,
                                 true}),
    [](const testing::TestParamInfo<HandOverCase>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace psflow::nn
