#include "worker/replay_trainable.h"

#include <time.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

int64_t MonotonicNanos() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * kNanosPerSecond + now.tv_nsec;
}

// Sleeps (the thread yields its core: no spinning) until CLOCK_MONOTONIC reads `deadline` ns.
void SleepUntil(int64_t deadline) {
  const timespec at{static_cast<time_t>(deadline / kNanosPerSecond),
                    static_cast<long>(deadline % kNanosPerSecond)};
  // A signal handler ends the sleep early with EINTR: sleep again to the same deadline.
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
}

int64_t Nanos(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }

}  // namespace

std::vector<nn::LayerTime> ScaleToStep(std::vector<nn::LayerTime> measured, double step_seconds) {
  double total = 0;
  for (const nn::LayerTime& t : measured) total += t.forward_seconds + t.backward_seconds;
  for (nn::LayerTime& t : measured) {
    if (total > 0) {
      t.forward_seconds *= step_seconds / total;
      t.backward_seconds *= step_seconds / total;
    } else {
      t.forward_seconds = 0;
      t.backward_seconds = step_seconds / static_cast<double>(measured.size());
    }
  }
  return measured;
}

std::string DescribeReplay(const std::vector<nn::LayerTime>& step) {
  double forward = 0, backward = 0;
  std::string layers;
  for (const nn::LayerTime& t : step) {
    forward += t.forward_seconds;
    backward += t.backward_seconds;
    absl::StrAppendFormat(&layers, "%s%s %.3f/%.3f", layers.empty() ? "" : ", ", t.layer,
                          1e3 * t.forward_seconds, 1e3 * t.backward_seconds);
  }
  return absl::StrFormat(
      "%.3f ms/step (forward %.3f, backward %.3f; per layer ms forward/backward: %s)",
      1e3 * (forward + backward), 1e3 * forward, 1e3 * backward, layers);
}

absl::StatusOr<std::unique_ptr<ReplayTrainable>> ReplayTrainable::Create(nn::Model& model,
                                                                         const nn::Batch& batch,
                                                                         double step_seconds) {
  ASSIGN_OR_RETURN(std::vector<nn::LayerTime> measured, model.ProfileLayers(batch, kProfileSteps));
  if (step_seconds > 0) measured = ScaleToStep(std::move(measured), step_seconds);
  return std::make_unique<ReplayTrainable>(model, std::move(measured));
}

ReplayTrainable::ReplayTrainable(nn::Model& model, std::vector<nn::LayerTime> step)
    : model_(model), step_(std::move(step)) {
  assert(static_cast<int>(step_.size()) == model_.num_layers());
}

absl::StatusOr<double> ReplayTrainable::ComputeGradients(const nn::Batch& batch, float clip_norm) {
  const bool stream = listener_ != nullptr && clip_norm <= 0 && !loss_scaled_;
  if (!captured_) {
    ASSIGN_OR_RETURN(loss_, model_.ComputeGradients(batch, clip_norm));
    finite_ = model_.last_step_finite();
    captured_ = finite_;
    if (captured_) Keep();
    // The model was not given the listener: its gradients are all final now.
    if (finite_) Backward(/*sleep=*/false, stream);
    return loss_;
  }
  Refill();
  Backward(/*sleep=*/true, stream);
  return loss_;
}

void ReplayTrainable::Keep() {
  nn::ParameterSet& params = model_.params();
  kept_grads_.assign(params.grads().begin(), params.grads().end());
  kept_rows_.assign(params.descs().size(), {});
  for (size_t h = 0; h < params.descs().size(); ++h) {
    const auto rows = params.touched_rows(static_cast<nn::ParameterSet::Handle>(h));
    kept_rows_[h].assign(rows.begin(), rows.end());
  }
  filled_ = {params.grads().data(), nullptr};
}

void ReplayTrainable::Refill() {
  nn::ParameterSet& params = model_.params();
  const float* now = params.grads().data();
  if (now == filled_[0] || now == filled_[1]) return;
  std::copy(kept_grads_.begin(), kept_grads_.end(), params.grads().begin());
  for (size_t h = 0; h < params.descs().size(); ++h) {
    const auto handle = static_cast<nn::ParameterSet::Handle>(h);
    if (params.sparse(handle)) params.SetTouchedRows(handle, kept_rows_[h]);
  }
  filled_ = {filled_[0], now};
}

void ReplayTrainable::Backward(bool sleep, bool stream) {
  int64_t deadline = MonotonicNanos();
  if (sleep) {
    double forward = 0;
    for (const nn::LayerTime& t : step_) forward += t.forward_seconds;
    deadline += Nanos(forward);
    SleepUntil(deadline);
  }
  for (int l = model_.num_layers(); l-- > 0;) {
    if (sleep) {
      deadline += Nanos(step_[static_cast<size_t>(l)].backward_seconds);
      SleepUntil(deadline);
    }
    const auto [first, last] = model_.layer_params(l);
    if (stream && first < last) listener_->GradientsReady(first, last);
  }
}

double ReplayTrainable::step_seconds() const {
  double total = 0;
  for (const nn::LayerTime& t : step_) total += t.forward_seconds + t.backward_seconds;
  return total;
}

void ReplayTrainable::SetLossScale(float scale) {
  model_.SetLossScale(scale);
  loss_scaled_ = scale > 0;
}

}  // namespace psflow
