#include <gtest/gtest.h>

#include "worker/parameter_sync.h"

namespace psflow {
namespace {

TEST(LocalUpdate, SparseParametersMoveOnlyInTheirTouchedRows) {
  nn::ParameterSet p;
  const auto emb = p.Declare("emb", {3, 2}, nn::Initializer::Zeros());
  const auto bias = p.Declare("bias", {2}, nn::Initializer::Zeros());
  p.MarkSparse(emb);
  p.Finalize();
  TrainingConfig config;
  config.optimizer.set_name("momentum");
  config.optimizer.set_learning_rate(0.5f);
  config.optimizer.set_momentum(0.9f);
  auto sync = LocalUpdate::Create(config);
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_TRUE((*sync)->Prepare(p, true).ok());
  // Step 1 touches row 0: accumulator 1, value -0.5.
  p.grad(emb)[0] = 1.0f;
  p.grad(bias)[0] = 1.0f;
  p.SetTouchedRows(emb, {0});
  ASSERT_TRUE((*sync)->Push(p, 1).ok());
  EXPECT_FLOAT_EQ(p.value(emb)[0], -0.5f);
  // Step 2 touches only row 2: row 0 keeps its value although its accumulator is not zero
  // (TensorFlow's sparse apply); the dense bias moves on its momentum.
  p.ZeroGrads();
  p.grad(emb)[4] = 2.0f;
  p.SetTouchedRows(emb, {2});
  ASSERT_TRUE((*sync)->Push(p, 1).ok());
  EXPECT_FLOAT_EQ(p.value(emb)[0], -0.5f);
  EXPECT_FLOAT_EQ(p.value(emb)[4], -1.0f);
  EXPECT_FLOAT_EQ(p.value(emb)[2], 0.0f);
  EXPECT_FLOAT_EQ(p.value(bias)[0], -0.5f - 0.5f * 0.9f);
}

}  // namespace
}  // namespace psflow
