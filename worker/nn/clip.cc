#include "worker/nn/clip.h"

#include <cmath>

namespace psflow::nn {
namespace {

// Calls fn(span) on each run of gradient elements that takes part: whole dense parameters, the
// touched rows of sparse ones.
template <class Fn>
void ForEachGradientRun(ParameterSet& params, Fn fn) {
  for (size_t i = 0; i < params.descs().size(); ++i) {
    const auto h = static_cast<ParameterSet::Handle>(i);
    std::span<float> g = params.grad(h);
    if (!params.sparse(h)) {
      fn(g);
      continue;
    }
    const auto& shape = params.descs()[i].shape;
    const int64_t rows = shape.empty() ? 1 : shape[0];
    const size_t width = rows == 0 ? 0 : g.size() / static_cast<size_t>(rows);
    for (int64_t r : params.touched_rows(h)) {
      fn(g.subspan(static_cast<size_t>(r) * width, width));
    }
  }
}

}  // namespace

double ClipByGlobalNorm(ParameterSet& params, float clip_norm) {
  double sum = 0;
  ForEachGradientRun(params, [&sum](std::span<float> g) {
    for (float x : g) sum += static_cast<double>(x) * x;
  });
  const double norm = std::sqrt(sum);
  if (norm > clip_norm) {
    const float scale = static_cast<float>(clip_norm / norm);
    ForEachGradientRun(params, [scale](std::span<float> g) {
      for (float& x : g) x *= scale;
    });
  }
  return norm;
}

}  // namespace psflow::nn
