// Gradient streaming on a GPU (Model::ComputeGradients with a GradientListener): the whole
// backward is queued, then each layer is told as the copy of its gradients lands on the host, the
// last layer's first, eagerly and from a replayed CUDA graph. What a layer's listener sees at
// that moment must be exactly the step's final gradient: a layer told before its copy landed
// would send stale or half-copied values. Needs a GPU: every test skips, saying why, where none
// is visible (this machine, CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/backend/cuda/forced_lstm_path.h"
#include "worker/models/model_zoo.h"
#include "worker/models/reference_models.h"
#include "worker/nn/backend.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/model.h"
#include "worker/nn/recording_listener.h"

namespace psflow::nn {
namespace {

struct StreamingCase {
  const char* name;
  ModelSpec (*spec)();
  int64_t batch;
  bool graphs;
};
void PrintTo(const StreamingCase& c, std::ostream* os) { *os << c.name; }

class GpuStreaming : public testing::TestWithParam<StreamingCase> {};

// Every parameter once per step, in backward order, each seen with its final gradient; the
// gradients themselves those of a model that streams nothing (the same seed and batches).
TEST_P(GpuStreaming, TellsEachLayerOnceInBackwardOrderWithItsFinalGradient) {
  const StreamingCase& c = GetParam();
  absl::StatusOr<std::unique_ptr<Backend>> gpu = MakeCudaBackend(0);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU to test on: " << gpu.status().message();
  absl::StatusOr<std::unique_ptr<Backend>> quiet_gpu = MakeCudaBackend(0);
  ASSERT_TRUE(quiet_gpu.ok()) << quiet_gpu.status();
  const ModelSpec spec = c.spec();
  auto model = Model::Create(spec, **gpu, c.batch, /*seed=*/3);
  if (const std::string why = ForcedLstmPathRefused(model.status()); !why.empty()) {
    GTEST_SKIP() << why;
  }
  ASSERT_TRUE(model.ok()) << model.status();
  auto quiet = Model::Create(spec, **quiet_gpu, c.batch, /*seed=*/3);
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  ParameterSet& params = (*model)->params();
  params.Initialize(5);
  std::copy(params.values().begin(), params.values().end(), (*quiet)->params().values().begin());
  (*model)->UploadParameters();
  (*quiet)->UploadParameters();
  if (c.graphs) (*model)->EnableGraphs();
  RecordingListener listener(params);
  (*model)->SetGradientListener(&listener);

  const int handles = static_cast<int>(params.descs().size());
  const int vocab = (*model)->labels_per_example() > 1 ? spec.num_classes : 0;
  // With graphs: step 0 checks the recording (told after its finish), steps 1-3 replay it.
  for (uint64_t step = 0; step < 4; ++step) {
    listener.Clear();
    const GradientCheckInput in =
        RandomInput(spec, c.batch, (*model)->labels_per_example(), 40 + step, vocab);
    const Batch b{in.inputs.data(), in.labels.data(), c.batch};
    absl::StatusOr<double> loss = (*model)->ComputeGradients(b);
    absl::StatusOr<double> quiet_loss = (*quiet)->ComputeGradients(b);
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_TRUE(quiet_loss.ok()) << quiet_loss.status();
    if (c.graphs) {
      ASSERT_EQ((*model)->graph_state(), Model::GraphState::kReplaying) << "step " << step;
    }

    EXPECT_EQ(listener.BackwardOrderError(handles), "") << "step " << step;
    EXPECT_EQ(listener.SeenDiffersFromNow(), "") << "step " << step;
    // Same kernels, same order: the streaming model's gradients are the quiet one's, up to the
    // atomics of the embedding's scatter-add.
    const auto q = (*quiet)->params().grads();
    const auto g = params.grads();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(g[i] - q[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(q[i])));
    }
    EXPECT_LE(diff, 1e-5 * scale) << "step " << step;
    EXPECT_NEAR(*loss, *quiet_loss, 1e-5 * std::fabs(*quiet_loss)) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GpuStreaming,
    testing::Values(StreamingCase{"mnist_cnn", models::MnistCnn, 32, false},
                    StreamingCase{"mnist_cnn_graphs", models::MnistCnn, 32, true},
                    StreamingCase{"ptb_small", [] { return SmallVocabularyPtb(); }, 20, false},
                    StreamingCase{"ptb_small_graphs", [] { return SmallVocabularyPtb(); }, 20,
                                  true}),
    [](const testing::TestParamInfo<StreamingCase>& i) { return i.param.name; });

}  // namespace
}  // namespace psflow::nn
