#include "core/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>

namespace psflow {

float LearningRateSchedule::At(float learning_rate, int epoch) const {
  if (decay == 1.0f || epoch < first_decay_epoch) return learning_rate;
  const int n = (epoch - first_decay_epoch) / std::max(decay_every_epochs, 1) + 1;
  return learning_rate * std::pow(decay, static_cast<float>(n));
}

}  // namespace psflow
