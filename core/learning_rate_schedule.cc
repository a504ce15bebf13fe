#include "core/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace psflow {

float LearningRateSchedule::At(float learning_rate, int epoch) const {
  if (decay == 1.0f || epoch < first_decay_epoch) return learning_rate;
  const int n = (epoch - first_decay_epoch) / std::max(decay_every_epochs, 1) + 1;
  const double rate = learning_rate * std::pow(static_cast<double>(decay), n);
  return static_cast<float>(std::clamp<double>(rate, std::numeric_limits<float>::min(),
                                               std::numeric_limits<float>::max()));
}

}  // namespace psflow
