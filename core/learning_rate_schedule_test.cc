#include "core/learning_rate_schedule.h"

#include <gtest/gtest.h>

#include <limits>

namespace psflow {
namespace {

TEST(LearningRateSchedule, DefaultIsConstant) {
  const LearningRateSchedule constant;
  EXPECT_EQ(constant.At(0.5f, 0), 0.5f);
  EXPECT_EQ(constant.At(0.5f, 1000), 0.5f);
}

// Seed 000's PTB small: max_epoch 4, lr_decay 0.5: epochs 0-3 at 1.0, then halved every epoch.
TEST(LearningRateSchedule, PtbDecaysEveryEpochAfterMaxEpoch) {
  const LearningRateSchedule ptb{.decay = 0.5f, .first_decay_epoch = 4, .decay_every_epochs = 1};
  EXPECT_EQ(ptb.At(1.0f, 0), 1.0f);
  EXPECT_EQ(ptb.At(1.0f, 3), 1.0f);
  EXPECT_EQ(ptb.At(1.0f, 4), 0.5f);
  EXPECT_EQ(ptb.At(1.0f, 5), 0.25f);
  EXPECT_EQ(ptb.At(1.0f, 12), 1.0f / 512);
}

// CIFAR-10 tutorial: 0.1x every 350 epochs, staircase.
TEST(LearningRateSchedule, CifarIsAStaircase) {
  const LearningRateSchedule cifar{
      .decay = 0.1f, .first_decay_epoch = 350, .decay_every_epochs = 350};
  EXPECT_EQ(cifar.At(0.1f, 349), 0.1f);
  EXPECT_FLOAT_EQ(cifar.At(0.1f, 350), 0.01f);
  EXPECT_FLOAT_EQ(cifar.At(0.1f, 699), 0.01f);
  EXPECT_FLOAT_EQ(cifar.At(0.1f, 700), 0.001f);
  const LearningRateSchedule zero_every{.decay = 0.5f, .decay_every_epochs = 0};
  EXPECT_EQ(zero_every.At(1.0f, 1), 0.25f);  // counted as 1
}

// PTB's halving, run for a long job (10000 epochs of the test config's 100 steps: --train_seconds
// with a large --train_steps): it stops at the smallest normal float, never 0, which the ps would
// refuse and end the job with.
TEST(LearningRateSchedule, ARateNeverUnderflowsToZeroNorOverflows) {
  const LearningRateSchedule halving{.decay = 0.5f};
  EXPECT_EQ(halving.At(1.0f, 125), 0x1p-126f);
  EXPECT_EQ(halving.At(1.0f, 126), 0x1p-126f);
  EXPECT_EQ(halving.At(1.0f, 149), std::numeric_limits<float>::min());
  EXPECT_EQ(halving.At(1.0f, 10000), std::numeric_limits<float>::min());
  const LearningRateSchedule growth{.decay = 2.0f};
  EXPECT_EQ(growth.At(1.0f, 10000), std::numeric_limits<float>::max());
}

}  // namespace
}  // namespace psflow
