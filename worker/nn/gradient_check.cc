#include "worker/nn/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/status_macros.h"
#include "worker/models/model_zoo.h"
#include "worker/models/reference_models.h"

namespace psflow::nn {

ModelSpec SmallVocabularyPtb(float keep_prob) {
  models::PtbConfig c = models::PtbConfigByName("small").value();
  c.vocab_size = 200;
  c.keep_prob = keep_prob;
  return models::PtbLstm(c, c.num_steps);
}

GradientCheckInput RandomInput(const ModelSpec& spec, int64_t batch, int64_t labels_per_example,
                               uint64_t seed, int vocab) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  GradientCheckInput in;
  in.batch = batch;
  const int64_t n = batch * NumElements(spec.input_shape);
  for (int64_t i = 0; i < n; ++i) {
    in.inputs.push_back(vocab > 0 ? static_cast<float>(rng() % vocab) : u(rng));
  }
  for (int64_t i = 0; i < batch * labels_per_example; ++i) {
    in.labels.push_back(static_cast<int32_t>(rng() % spec.num_classes));
  }
  return in;
}

absl::StatusOr<double> MaxGradientError(const ModelSpec& spec, const GradientCheckInput& input,
                                        const GradientCheckOptions& options) {
  auto backend = MakeCpuBackend(1);
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(spec, *backend, input.batch));
  ParameterSet& p = model->params();
  p.Initialize(options.init_seed);
  if (options.perturb_biases) {
    for (const auto& d : p.descs()) {
      if (d.shape.size() != 1) continue;
      for (int64_t i = 0; i < d.size; ++i) p.values()[d.offset + i] = 0.1f * std::sin(i + 1.0f);
    }
  }
  const Batch b{input.inputs.data(), input.labels.data(), input.batch};
  auto loss = [&]() -> absl::StatusOr<double> {
    model->UploadParameters();
    model->ResetState();
    model->RewindRandomness(0);
    return model->ComputeGradients(b);
  };
  RETURN_IF_ERROR(loss().status());
  const std::vector<float> analytic(p.grads().begin(), p.grads().end());
  double worst = 0;
  const float h = options.step;
  for (const auto& d : p.descs()) {
    for (int64_t i = 0; i < d.size; ++i) {
      float& w = p.values()[d.offset + i];
      const float saved = w;
      w = saved + h;
      ASSIGN_OR_RETURN(const double up, loss());
      w = saved - h;
      ASSIGN_OR_RETURN(const double down, loss());
      w = saved;
      const double numeric = (up - down) / (2.0 * h);
      const double a = analytic[d.offset + i];
      worst = std::max(worst,
                       std::fabs(a - numeric) / std::max(1e-3, std::fabs(a) + std::fabs(numeric)));
    }
  }
  return worst;
}

}  // namespace psflow::nn
