// Loss scaling for fp16 products (Micikevicius et al., "Mixed Precision Training", 2018; PyTorch's
// GradScaler). The gradient of the loss is multiplied by scale() before backward, so that small
// gradients survive fp16's range (below 6e-8 they flush to zero), and the parameter gradients are
// multiplied by 1 / scale() before anything reads them: what is pushed is the true gradient.
//
// Dynamic scaling looks for the largest scale that does not overflow: a step whose gradients are
// not all finite is skipped (never pushed) and halves the scale; `growth_interval` finite steps in
// a row double it. Static scaling keeps one scale; a non-finite step is skipped all the same.
// Not thread-safe: the trainer's thread owns it.
#ifndef PSFLOW_WORKER_NN_LOSS_SCALE_H_
#define PSFLOW_WORKER_NN_LOSS_SCALE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::nn {

struct LossScaleOptions {
  enum class Mode { kNone, kStatic, kDynamic };
  Mode mode = Mode::kNone;
  float initial = 65536.0f;  // kStatic: the scale; kDynamic: where it starts (PyTorch's 2^16)
  int64_t growth_interval = 2000;
};

// "none", "dynamic", or a positive finite number (a static scale). INVALID_ARGUMENT otherwise
// ("must be none, dynamic or ...": the caller names the flag).
absl::StatusOr<LossScaleOptions> ParseLossScale(absl::string_view text);

class LossScaler {
 public:
  explicit LossScaler(LossScaleOptions options);

  // What the loss's gradient is multiplied by this step: 1 with kNone. Dynamic: never below
  // 2^-24 nor above 2^64 (growth stops there).
  float scale() const { return scale_; }

  // After a step: `finite` tells whether all its (unscaled) gradients were finite. Returns
  // whether the step may be applied (pushed): exactly when `finite`. Dynamic mode halves the
  // scale on a non-finite step and doubles it after growth_interval finite ones in a row.
  bool Update(bool finite);

  int64_t skipped_steps() const { return skipped_; }
  // Non-finite steps since the last finite one.
  int64_t consecutive_skipped() const { return consecutive_skipped_; }

 private:
  LossScaleOptions options_;
  float scale_;
  int64_t good_in_a_row_ = 0;
  int64_t skipped_ = 0;
  int64_t consecutive_skipped_ = 0;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_LOSS_SCALE_H_
