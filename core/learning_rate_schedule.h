// A step-decay learning-rate schedule by epoch, as the seeds use them:
//   lr(epoch) = learning_rate * decay^n, n = 0 before first_decay_epoch, then
//   (epoch - first_decay_epoch) / decay_every_epochs + 1 (epochs count from 0).
// PTB (seed 000): lr_decay^max(epoch + 1 - max_epoch, 0), i.e. first_decay_epoch = max_epoch,
// decay_every_epochs = 1; CIFAR-10: 0.1x every 350 epochs (staircase). The default is constant.
#ifndef PSFLOW_CORE_LEARNING_RATE_SCHEDULE_H_
#define PSFLOW_CORE_LEARNING_RATE_SCHEDULE_H_

namespace psflow {

struct LearningRateSchedule {
  float decay = 1.0f;
  int first_decay_epoch = 0;
  int decay_every_epochs = 1;  // values < 1 count as 1

  float At(float learning_rate, int epoch) const;
  bool operator==(const LearningRateSchedule&) const = default;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_LEARNING_RATE_SCHEDULE_H_
