#include "worker/nn/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

namespace psflow {
namespace {

TEST(UnscaleAndClip, ScalesEveryGradientOnlyAboveTheNorm) {
  nn::ParameterSet p;
  const auto a = p.Declare("a", {2}, nn::Initializer::Zeros());
  const auto b = p.Declare("b", {1}, nn::Initializer::Zeros());
  p.Finalize();
  // Global norm of (3, 0) and (4) is 5.
  p.grad(a)[0] = 3;
  p.grad(b)[0] = 4;
  EXPECT_DOUBLE_EQ(nn::UnscaleAndClip(p, 1.0f, 10.0f), 5.0);
  EXPECT_FLOAT_EQ(p.grad(a)[0], 3.0f);  // under the norm: untouched
  EXPECT_DOUBLE_EQ(nn::UnscaleAndClip(p, 1.0f, 2.5f), 5.0);
  EXPECT_FLOAT_EQ(p.grad(a)[0], 1.5f);  // scaled by 2.5 / 5
  EXPECT_FLOAT_EQ(p.grad(a)[1], 0.0f);
  EXPECT_FLOAT_EQ(p.grad(b)[0], 2.0f);
}

TEST(UnscaleAndClip, SparseParametersCountOnlyTheirTouchedRows) {
  nn::ParameterSet p;
  const auto emb = p.Declare("emb", {3, 2}, nn::Initializer::Zeros());
  p.MarkSparse(emb);
  p.Finalize();
  for (float& g : p.grad(emb)) g = 100;  // rows 0 and 2 are stale leftovers, not this step's
  p.grad(emb)[2] = 6;
  p.grad(emb)[3] = 8;
  p.SetTouchedRows(emb, {1});
  EXPECT_DOUBLE_EQ(nn::UnscaleAndClip(p, 1.0f, 5.0f), 10.0);
  EXPECT_FLOAT_EQ(p.grad(emb)[2], 3.0f);
  EXPECT_FLOAT_EQ(p.grad(emb)[3], 4.0f);
  EXPECT_FLOAT_EQ(p.grad(emb)[0], 100.0f);  // untouched rows are left alone
}

TEST(UnscaleAndClip, UnscalesBeforeMeasuringAndClipping) {
  nn::ParameterSet p;
  const auto a = p.Declare("a", {2}, nn::Initializer::Zeros());
  p.Finalize();
  // Gradients of a loss scaled by 1024: (3, 4) * 1024.
  p.grad(a)[0] = 3072;
  p.grad(a)[1] = 4096;
  EXPECT_DOUBLE_EQ(nn::UnscaleAndClip(p, 1.0f / 1024, 0), 5.0);  // measured, not clipped
  EXPECT_FLOAT_EQ(p.grad(a)[0], 3.0f);
  EXPECT_FLOAT_EQ(p.grad(a)[1], 4.0f);
  p.grad(a)[0] = 3072;
  p.grad(a)[1] = 4096;
  EXPECT_DOUBLE_EQ(nn::UnscaleAndClip(p, 1.0f / 1024, 1.0f), 5.0);
  EXPECT_FLOAT_EQ(p.grad(a)[0], 0.6f);
  EXPECT_FLOAT_EQ(p.grad(a)[1], 0.8f);
  // Neither: nothing measured, nothing changed.
  EXPECT_DOUBLE_EQ(nn::UnscaleAndClip(p, 1.0f, 0), 0.0);
  EXPECT_FLOAT_EQ(p.grad(a)[0], 0.6f);
}

TEST(UnscaleAndClip, ANonFiniteGradientGivesANonFiniteNormAndNoClip) {
  nn::ParameterSet p;
  const auto a = p.Declare("a", {3}, nn::Initializer::Zeros());
  p.Finalize();
  p.grad(a)[0] = 10;
  p.grad(a)[1] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(std::isfinite(nn::UnscaleAndClip(p, 0.5f, 1.0f)));
  EXPECT_FLOAT_EQ(p.grad(a)[0], 5.0f);  // unscaled, but not clipped by an infinite norm
  p.grad(a)[1] = std::nanf("");
  EXPECT_FALSE(std::isfinite(nn::UnscaleAndClip(p, 1.0f, 0.0f + 1e9f)));
}

TEST(AddWeightedGradients, WeightsDenseAndUnitesSparseRows) {
  // Three towers: into (weight 0.5), two others (0.25 each; one idle with weight 0).
  auto make = [] {
    auto p = std::make_unique<nn::ParameterSet>();
    p->Declare("w", {2}, nn::Initializer::Zeros());
    p->MarkSparse(p->Declare("emb", {4, 2}, nn::Initializer::Zeros()));
    p->Finalize();
    return p;
  };
  auto into = make(), one = make(), idle = make();
  const int w = 0, emb = 1;
  into->grad(w)[0] = 4;
  into->grad(w)[1] = 8;
  one->grad(w)[0] = 2;
  one->grad(w)[1] = 2;
  idle->grad(w)[0] = 1000;                  // never read: weight 0
  for (float& g : into->grad(emb)) g = -1;  // stale except the touched row 1
  into->grad(emb)[2] = 2;
  into->grad(emb)[3] = 2;
  into->SetTouchedRows(emb, {1});
  for (float& g : one->grad(emb)) g = -7;  // stale except rows 1 and 3
  one->grad(emb)[2] = 4;
  one->grad(emb)[3] = 4;
  one->grad(emb)[6] = 8;
  one->grad(emb)[7] = 8;
  one->SetTouchedRows(emb, {1, 3});
  idle->SetTouchedRows(emb, {0});
  std::vector<nn::ParameterSet*> from = {one.get(), idle.get()};
  const std::vector<float> weights = {0.5f, 0.25f, 0.0f};
  std::vector<int64_t> scratch;
  nn::AddWeightedGradients(*into, from, weights, scratch);
  EXPECT_FLOAT_EQ(into->grad(w)[0], 2.5f);
  EXPECT_FLOAT_EQ(into->grad(w)[1], 4.5f);
  const std::span<const int64_t> rows = into->touched_rows(emb);
  EXPECT_EQ(std::vector<int64_t>(rows.begin(), rows.end()), (std::vector<int64_t>{1, 3}));
  EXPECT_FLOAT_EQ(into->grad(emb)[2], 2.0f);  // 0.5 * 2 + 0.25 * 4
  EXPECT_FLOAT_EQ(into->grad(emb)[6], 2.0f);  // new row: from zero, 0.25 * 8
  EXPECT_FLOAT_EQ(into->grad(emb)[7], 2.0f);
}

}  // namespace
}  // namespace psflow
