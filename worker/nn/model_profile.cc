// Model::ProfileLayers: the per-layer times a replayed step (--compute=replay) spends instead of
// computing.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status_macros.h"
#include "worker/nn/model.h"

namespace psflow::nn {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The median of `v` (not empty); reorders it.
double Median(std::vector<double>& v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

absl::StatusOr<std::vector<LayerTime>> Model::ProfileLayers(const Batch& batch, int steps) {
  if (steps < 1) return absl::InvalidArgumentError("ProfileLayers needs steps >= 1");
  const size_t n = layers_.size();
  // forward[l][s], backward[l][s]: layer l in timed step s.
  std::vector<std::vector<double>> forward(n), backward(n);
  const uint64_t first_step = step_;
  // Step 0 warms the caches and the thread pool up and is not counted.
  for (int s = 0; s <= steps; ++s) {
    RETURN_IF_ERROR(Stage(batch, /*training=*/true));
    const int64_t rows = batch.size;
    backend_.CopyToDevice(input_, acts_[0].get(), rows * widths_[0]);
    backend_.ZeroGradients(params_);
    RETURN_IF_ERROR(backend_.Synchronize());
    const RunContext ctx{&params_, true, step_, nullptr, loss_scale_};
    std::vector<double> f(n), b(n);
    for (size_t l = 0; l < n; ++l) {
      const Clock::time_point start = Clock::now();
      layers_[l]->Forward(ctx, views_[l], views_[l + 1]);
      if (l + 1 == n) {
        const int64_t classes = spec_.num_classes;
        const Matrix& y = views_[n];
        const Matrix& dy = grad_views_[n];
        loss_->ForwardBackward(Matrix{y.data, y.size() / classes, classes, y.device},
                               loss_scale_ / static_cast<float>(rows),
                               Matrix{dy.data, dy.size() / classes, classes, dy.device});
      }
      RETURN_IF_ERROR(backend_.Synchronize());
      f[l] = SecondsSince(start);
    }
    for (size_t l = n; l-- > 0;) {
      const Clock::time_point start = Clock::now();
      layers_[l]->Backward(ctx, views_[l], views_[l + 1], grad_views_[l + 1],
                           l == 0 ? nullptr : &grad_views_[l]);
      RETURN_IF_ERROR(backend_.Synchronize());
      b[l] = SecondsSince(start);
    }
    ++step_;
    if (s == 0) continue;
    for (size_t l = 0; l < n; ++l) {
      forward[l].push_back(f[l]);
      backward[l].push_back(b[l]);
    }
  }
  // What profiling ran must not show in training: the same masks, stateful layers from zeros.
  step_ = first_step;
  ResetState();
  std::vector<LayerTime> times;
  times.reserve(n);
  for (size_t l = 0; l < n; ++l) {
    times.push_back({layers_[l]->name(), Median(forward[l]), Median(backward[l])});
  }
  return times;
}

}  // namespace psflow::nn
