// Test support: a model's analytic gradients against central finite differences of its loss.
#ifndef PSFLOW_WORKER_NN_GRADIENT_CHECK_H_
#define PSFLOW_WORKER_NN_GRADIENT_CHECK_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/nn/model.h"

namespace psflow::nn {

struct GradientCheckInput {
  std::vector<float> inputs;    // batch * NumElements(input_shape)
  std::vector<int32_t> labels;  // batch * labels per example
  int64_t batch = 0;
};

// The PTB LSTM at seed 000's small configuration with a vocabulary of 200 (a fast test): a sparse
// embedding, two LSTMs and the softmax layer, with dropout when keep_prob < 1.
ModelSpec SmallVocabularyPtb(float keep_prob = 1.0f);

// Uniform [0, 1) inputs (or, when `vocab` > 0, token ids in [0, vocab)) and random labels.
GradientCheckInput RandomInput(const ModelSpec& spec, int64_t batch, int64_t labels_per_example,
                               uint64_t seed, int vocab = 0);

struct GradientCheckOptions {
  float step = 1e-2f;          // h of (L(w + h) - L(w - h)) / 2h
  uint64_t init_seed = 7;      // parameters drawn from the spec's initialisers ...
  bool perturb_biases = true;  // ... and 1-D parameters set to small distinct non-zero values
};

// Max over every parameter entry of |analytic - numeric| / max(1e-3, |a| + |n|). State
// is reset and the same dropout masks are drawn before every evaluation of the loss.
absl::StatusOr<double> MaxGradientError(const ModelSpec& spec, const GradientCheckInput& input,
                                        const GradientCheckOptions& options = {});

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_GRADIENT_CHECK_H_
