#include "worker/nn/loss_scale.h"

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace psflow::nn {
namespace {

constexpr float kMinScale = 0x1p-24f;
constexpr float kMaxScale = 0x1p64f;

}  // namespace

absl::StatusOr<LossScaleOptions> ParseLossScale(absl::string_view text) {
  LossScaleOptions o;
  if (text == "none") return o;
  if (text == "dynamic") {
    o.mode = LossScaleOptions::Mode::kDynamic;
    return o;
  }
  float value = 0;
  if (!absl::SimpleAtof(text, &value) || !std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("must be none, dynamic or a positive number, got \"", text, "\""));
  }
  o.mode = LossScaleOptions::Mode::kStatic;
  o.initial = value;
  return o;
}

LossScaler::LossScaler(LossScaleOptions options)
    : options_(options),
      scale_(options.mode == LossScaleOptions::Mode::kNone ? 1.0f : options.initial) {}

bool LossScaler::Update(bool finite) {
  const bool dynamic = options_.mode == LossScaleOptions::Mode::kDynamic;
  if (!finite) {
    ++skipped_;
    ++consecutive_skipped_;
    good_in_a_row_ = 0;
    if (dynamic) scale_ = std::max(scale_ * 0.5f, kMinScale);
    return false;
  }
  consecutive_skipped_ = 0;
  if (dynamic && ++good_in_a_row_ >= options_.growth_interval) {
    good_in_a_row_ = 0;
    scale_ = std::min(scale_ * 2.0f, kMaxScale);
  }
  return true;
}

}  // namespace psflow::nn
