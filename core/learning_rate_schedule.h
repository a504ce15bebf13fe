// A step-decay learning-rate schedule by epoch, as the seeds use them:
//   lr(epoch) = learning_rate * decay^n, n = 0 before first_decay_epoch, then
//   (epoch - first_decay_epoch) / decay_every_epochs + 1 (epochs count from 0).
// PTB (seed 000): lr_decay^max(epoch + 1 - max_epoch, 0), i.e. first_decay_epoch = max_epoch,
// decay_every_epochs = 1; CIFAR-10: 0.1x every 350 epochs (staircase). The default is constant.
// Computed in double and rounded once to float, as the seeds' Python computes the rate it
// assigns. A positive rate stays a positive float: a decay that would underflow stops at the
// smallest normal float (a rate of 1 halved 126 times; the ps refuses a rate of 0, which ended a
// long PTB job after 150 halvings), and a growth stops at the largest.
#ifndef PSFLOW_CORE_LEARNING_RATE_SCHEDULE_H_
#define PSFLOW_CORE_LEARNING_RATE_SCHEDULE_H_

namespace psflow {

struct LearningRateSchedule {
  float decay = 1.0f;
  int first_decay_epoch = 0;
  int decay_every_epochs = 1;  // values < 1 count as 1

  // The rate of `epoch` for an initial rate `learning_rate` (> 0).
  float At(float learning_rate, int epoch) const;
  bool operator==(const LearningRateSchedule&) const = default;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_LEARNING_RATE_SCHEDULE_H_
