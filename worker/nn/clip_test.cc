#include "worker/nn/clip.h"

#include <gtest/gtest.h>

namespace psflow {
namespace {

TEST(ClipByGlobalNorm, ScalesEveryGradientOnlyAboveTheNorm) {
  nn::ParameterSet p;
  const auto a = p.Declare("a", {2}, nn::Initializer::Zeros());
  const auto b = p.Declare("b", {1}, nn::Initializer::Zeros());
  p.Finalize();
  // Global norm of (3, 0) and (4) is 5.
  p.grad(a)[0] = 3;
  p.grad(b)[0] = 4;
  EXPECT_DOUBLE_EQ(nn::ClipByGlobalNorm(p, 10.0f), 5.0);
  EXPECT_FLOAT_EQ(p.grad(a)[0], 3.0f);  // under the norm: untouched
  EXPECT_DOUBLE_EQ(nn::ClipByGlobalNorm(p, 2.5f), 5.0);
  EXPECT_FLOAT_EQ(p.grad(a)[0], 1.5f);  // scaled by 2.5 / 5
  EXPECT_FLOAT_EQ(p.grad(a)[1], 0.0f);
  EXPECT_FLOAT_EQ(p.grad(b)[0], 2.0f);
}

TEST(ClipByGlobalNorm, SparseParametersCountOnlyTheirTouchedRows) {
  nn::ParameterSet p;
  const auto emb = p.Declare("emb", {3, 2}, nn::Initializer::Zeros());
  p.MarkSparse(emb);
  p.Finalize();
  for (float& g : p.grad(emb)) g = 100;  // rows 0 and 2 are stale leftovers, not this step's
  p.grad(emb)[2] = 6;
  p.grad(emb)[3] = 8;
  p.SetTouchedRows(emb, {1});
  EXPECT_DOUBLE_EQ(nn::ClipByGlobalNorm(p, 5.0f), 10.0);
  EXPECT_FLOAT_EQ(p.grad(emb)[2], 3.0f);
  EXPECT_FLOAT_EQ(p.grad(emb)[3], 4.0f);
  EXPECT_FLOAT_EQ(p.grad(emb)[0], 100.0f);  // untouched rows are left alone
}

}  // namespace
}  // namespace psflow
