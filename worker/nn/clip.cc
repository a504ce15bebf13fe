#include "worker/nn/clip.h"

#include <algorithm>
#include <cmath>

namespace psflow::nn {
namespace {

// Calls fn(handle, span) on each run of gradient elements of `range` that takes part: whole
// dense parameters, the touched rows of sparse ones.
template <class Fn>
void ForEachGradientRun(ParameterSet& params, Fn fn, HandleRange range = {}) {
  const auto end = static_cast<size_t>(range.end(params));
  for (size_t i = static_cast<size_t>(range.first); i < end; ++i) {
    const auto h = static_cast<ParameterSet::Handle>(i);
    std::span<float> g = params.grad(h);
    if (!params.sparse(h)) {
      fn(h, g);
      continue;
    }
    const auto width = static_cast<size_t>(params.descs()[i].row_width());
    for (int64_t r : params.touched_rows(h))
      fn(h, g.subspan(static_cast<size_t>(r) * width, width));
  }
}

void Scale(ParameterSet& params, float factor, HandleRange range = {}) {
  ForEachGradientRun(
      params,
      [factor](int, std::span<float> g) {
        for (float& x : g) x *= factor;
      },
      range);
}

}  // namespace

double UnscaleAndClip(ParameterSet& params, float unscale, float clip_norm, bool measure) {
  if (unscale != 1.0f) Scale(params, unscale);
  if (!measure && clip_norm <= 0 && unscale == 1.0f) return 0;
  double sum = 0;
  ForEachGradientRun(params, [&sum](int, std::span<float> g) {
    for (float x : g) sum += static_cast<double>(x) * x;
  });
  const double norm = std::sqrt(sum);
  if (clip_norm > 0 && std::isfinite(norm) && norm > clip_norm) {
    Scale(params, static_cast<float>(clip_norm / norm));
  }
  return norm;
}

void MergeTouchedRows(ParameterSet& into, std::span<ParameterSet* const> from,
                      std::span<const float> weights, bool zero_new_rows,
                      std::vector<int64_t>& scratch, HandleRange range) {
  const auto end = static_cast<size_t>(range.end(into));
  for (size_t i = static_cast<size_t>(range.first); i < end; ++i) {
    const auto h = static_cast<ParameterSet::Handle>(i);
    if (!into.sparse(h)) continue;
    const std::span<const int64_t> own = into.touched_rows(h);
    scratch.assign(own.begin(), own.end());
    const auto width = static_cast<size_t>(into.descs()[i].row_width());
    std::span<float> g = into.grad(h);
    bool grew = false;
    for (size_t k = 0; k < from.size(); ++k) {
      if (weights[k + 1] == 0) continue;
      for (const int64_t r : from[k]->touched_rows(h)) {
        const auto at = std::lower_bound(scratch.begin(), scratch.end(), r);
        if (at != scratch.end() && *at == r) continue;
        scratch.insert(at, r);
        grew = true;
        if (zero_new_rows) {
          std::fill_n(g.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * width),
                      width, 0.0f);
        }
      }
    }
    // Already the union (streaming towers merged them before the step's first GradientsReady):
    // left as they are, so that readers on other threads see no write.
    if (grew) into.SetTouchedRows(h, scratch);
  }
}

void AddWeightedGradients(ParameterSet& into, std::span<ParameterSet* const> from,
                          std::span<const float> weights, std::vector<int64_t>& scratch,
                          HandleRange range) {
  // Rows only others touched are zeroed before anything reads them; then every run of into
  // (dense whole, sparse touched rows: the union) is scaled by its weight.
  MergeTouchedRows(into, from, weights, /*zero_new_rows=*/true, scratch, range);
  Scale(into, weights[0], range);
  for (size_t k = 0; k < from.size(); ++k) {
    const float w = weights[k + 1];
    if (w == 0) continue;
    ParameterSet& other = *from[k];
    // Their runs: dense parameters whole, their own touched rows of sparse ones.
    ForEachGradientRun(
        other,
        [&](int h, std::span<float> theirs) {
          const size_t offset = static_cast<size_t>(theirs.data() - other.grad(h).data());
          float* dst = into.grad(h).data() + offset;
          for (size_t e = 0; e < theirs.size(); ++e) dst[e] += w * theirs[e];
        },
        range);
  }
}

}  // namespace psflow::nn
