#include "worker/nn/loss_scale.h"

#include <gtest/gtest.h>

namespace psflow::nn {
namespace {

TEST(ParseLossScale, AcceptsNoneDynamicOrAPositiveNumber) {
  EXPECT_EQ(ParseLossScale("none")->mode, LossScaleOptions::Mode::kNone);
  EXPECT_EQ(ParseLossScale("dynamic")->mode, LossScaleOptions::Mode::kDynamic);
  const absl::StatusOr<LossScaleOptions> fixed = ParseLossScale("128");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->mode, LossScaleOptions::Mode::kStatic);
  EXPECT_FLOAT_EQ(fixed->initial, 128.0f);
  for (const char* bad : {"", "0", "-4", "inf", "nan", "big", "dynamic "}) {
    const absl::StatusOr<LossScaleOptions> o = ParseLossScale(bad);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(o.status().message().find("none, dynamic or a positive number"), std::string::npos);
  }
}

TEST(LossScaler, NoneIsOneAndStillRefusesNonFiniteSteps) {
  LossScaler s(LossScaleOptions{});
  EXPECT_FLOAT_EQ(s.scale(), 1.0f);
  EXPECT_TRUE(s.Update(true));
  EXPECT_FALSE(s.Update(false));
  EXPECT_FLOAT_EQ(s.scale(), 1.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
}

TEST(LossScaler, DynamicHalvesOnOverflowAndDoublesAfterTheGrowthInterval) {
  LossScaler s(LossScaleOptions{LossScaleOptions::Mode::kDynamic, 1024.0f, 3});
  EXPECT_FLOAT_EQ(s.scale(), 1024.0f);
  EXPECT_FALSE(s.Update(false));
  EXPECT_FALSE(s.Update(false));
  EXPECT_FLOAT_EQ(s.scale(), 256.0f);
  EXPECT_EQ(s.consecutive_skipped(), 2);
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.consecutive_skipped(), 0);
  EXPECT_FLOAT_EQ(s.scale(), 256.0f);  // two finite steps: not yet
  EXPECT_TRUE(s.Update(true));
  EXPECT_FLOAT_EQ(s.scale(), 512.0f);  // the third doubles it, and the count starts again
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_FALSE(s.Update(false));  // an overflow resets the run of good steps
  EXPECT_FLOAT_EQ(s.scale(), 256.0f);
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_FLOAT_EQ(s.scale(), 256.0f);
  EXPECT_EQ(s.skipped_steps(), 3);
}

TEST(LossScaler, DynamicStaysWithinItsBounds) {
  LossScaler low(LossScaleOptions{LossScaleOptions::Mode::kDynamic, 1.0f, 1});
  for (int i = 0; i < 100; ++i) low.Update(false);
  EXPECT_FLOAT_EQ(low.scale(), 0x1p-24f);
  LossScaler high(LossScaleOptions{LossScaleOptions::Mode::kDynamic, 1.0f, 1});
  for (int i = 0; i < 100; ++i) high.Update(true);
  EXPECT_FLOAT_EQ(high.scale(), 0x1p64f);
}

TEST(LossScaler, StaticKeepsItsScale) {
  LossScaler s(*ParseLossScale("8"));
  EXPECT_FALSE(s.Update(false));
  for (int i = 0; i < 5000; ++i) s.Update(true);
  EXPECT_FLOAT_EQ(s.scale(), 8.0f);
}

}  // namespace
}  // namespace psflow::nn
