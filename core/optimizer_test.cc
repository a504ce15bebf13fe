#include "core/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psflow {
namespace {

using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

proto::OptimizerConfig Config(const std::string& name, float learning_rate) {
  proto::OptimizerConfig config;
  config.set_name(name);
  config.set_learning_rate(learning_rate);
  return config;
}

std::unique_ptr<Optimizer> Make(const proto::OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(config);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? std::move(optimizer).value() : nullptr;
}

// A partition and its slots, the slots at the optimizer's initial values.
struct State {
  State(const Optimizer& optimizer, std::vector<float> initial_var) : var(std::move(initial_var)) {
    for (int k = 0; k < optimizer.num_slots(); ++k) {
      slots.emplace_back(var.size(), optimizer.slot_initial_value(k));
    }
  }

  // Apply on elements [begin, end).
  void Apply(const Optimizer& optimizer, float learning_rate, int64_t step,
             const std::vector<float>& grad, size_t begin, size_t end) {
    ASSERT_EQ(grad.size(), var.size());
    std::vector<std::span<float>> slot_spans;
    for (std::vector<float>& slot : slots) {
      slot_spans.push_back(std::span<float>(slot).subspan(begin, end - begin));
    }
    optimizer.Apply(learning_rate, step, std::span<float>(var).subspan(begin, end - begin),
                    std::span<const float>(grad).subspan(begin, end - begin), slot_spans);
  }
  void Apply(const Optimizer& optimizer, float learning_rate, int64_t step,
             const std::vector<float>& grad) {
    Apply(optimizer, learning_rate, step, grad, 0, var.size());
  }

  std::vector<float> var;
  std::vector<std::vector<float>> slots;
};

// Every element within 1e-6 relative (the expected values are computed in double from the
// same float hyper-parameters; the optimizer works in float).
void ExpectNear(const std::vector<float>& actual, const std::vector<double>& expected,
                const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-6 * std::max(1.0, std::abs(expected[i])))
        << what << "[" << i << "]";
  }
}

// ---------------------------------------------------------------------------------------------
// Update rules, against values worked out by hand.

TEST(OptimizerTest, Sgd) {
  std::unique_ptr<Optimizer> sgd = Make(Config("sgd", 0.5f));
  ASSERT_NE(sgd, nullptr);
  EXPECT_EQ(sgd->num_slots(), 0);
  State s(*sgd, {1, 2, 3});

  // var -= 0.5 * g, g = {1, -2, 0.5}
  s.Apply(*sgd, 0.5f, 1, {1, -2, 0.5f});
  ExpectNear(s.var, {1 - 0.5, 2 + 1, 3 - 0.25}, "var");  // {0.5, 3, 2.75}

  // g = {2, 2, -4}
  s.Apply(*sgd, 0.5f, 2, {2, 2, -4});
  ExpectNear(s.var, {0.5 - 1, 3 - 1, 2.75 + 2}, "var");  // {-0.5, 2, 4.75}
}

TEST(OptimizerTest, Momentum) {
  proto::OptimizerConfig config = Config("momentum", 0.5f);
  config.set_momentum(0.5f);
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  State s(*opt, {1, 2, 3});

  // accum = 0.5 * 0 + g = {1, -2, 4};  var -= 0.5 * accum
  s.Apply(*opt, 0.5f, 1, {1, -2, 4});
  ExpectNear(s.slots[0], {1, -2, 4}, "accum");
  ExpectNear(s.var, {1 - 0.5, 2 + 1, 3 - 2}, "var");  // {0.5, 3, 1}

  // accum = 0.5 * {1, -2, 4} + {1, 2, -2} = {1.5, 1, 0};  var -= 0.5 * accum
  s.Apply(*opt, 0.5f, 2, {1, 2, -2});
  ExpectNear(s.slots[0], {0.5 + 1, -1 + 2, 2 - 2}, "accum");
  ExpectNear(s.var, {0.5 - 0.75, 3 - 0.5, 1 - 0}, "var");  // {-0.25, 2.5, 1}

  // A zero gradient still moves: accum = 0.5 * {1.5, 1, 0} = {0.75, 0.5, 0}
  s.Apply(*opt, 0.5f, 3, {0, 0, 0});
  ExpectNear(s.slots[0], {0.75, 0.5, 0}, "accum");
  ExpectNear(s.var, {-0.25 - 0.375, 2.5 - 0.25, 1}, "var");  // {-0.625, 2.25, 1}
}

TEST(OptimizerTest, Nesterov) {
  proto::OptimizerConfig config = Config("momentum", 0.5f);
  config.set_momentum(0.5f);
  config.set_use_nesterov(true);
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  State s(*opt, {1, 2, 3});

  // accum = {1, -2, 4};  var -= lr * g + lr * momentum * accum = 0.5 * g + 0.25 * accum
  //   = {0.5 + 0.25, -1 - 0.5, 2 + 1} = {0.75, -1.5, 3}
  s.Apply(*opt, 0.5f, 1, {1, -2, 4});
  ExpectNear(s.slots[0], {1, -2, 4}, "accum");
  ExpectNear(s.var, {1 - 0.75, 2 + 1.5, 3 - 3}, "var");  // {0.25, 3.5, 0}

  // accum = 0.5 * {1, -2, 4} + {1, 2, -2} = {1.5, 1, 0}
  // var -= 0.5 * {1, 2, -2} + 0.25 * {1.5, 1, 0} = {0.875, 1.25, -1}
  s.Apply(*opt, 0.5f, 2, {1, 2, -2});
  ExpectNear(s.slots[0], {1.5, 1, 0}, "accum");
  ExpectNear(s.var, {0.25 - 0.875, 3.5 - 1.25, 0 + 1}, "var");  // {-0.625, 2.25, 1}
}

TEST(OptimizerTest, AdagradDefaultInitialAccumulator) {
  std::unique_ptr<Optimizer> opt = Make(Config("adagrad", 0.5f));
  ASSERT_NE(opt, nullptr);
  ASSERT_EQ(opt->num_slots(), 1);
  EXPECT_FLOAT_EQ(opt->slot_initial_value(0), 0.1f);
  State s(*opt, {1, 2, 3});
  // TF1's Adagrad has no epsilon: the default 0 stays.
  const double a0 = 0.1f;  // the accumulator starts at 0.1 (as float)

  // accum = 0.1 + g^2 = {1.1, 4.1, 0.35};  var -= 0.5 * g / sqrt(accum)
  s.Apply(*opt, 0.5f, 1, {1, -2, 0.5f});
  ExpectNear(s.slots[0], {a0 + 1, a0 + 4, a0 + 0.25}, "accum");
  ExpectNear(s.var,
             {1 - 0.5 * 1 / std::sqrt(a0 + 1), 2 - 0.5 * -2 / std::sqrt(a0 + 4),
              3 - 0.5 * 0.5 / std::sqrt(a0 + 0.25)},
             "var");

  // accum += {1, 1, 0.25} -> {2.1, 5.1, 0.6};  var -= 0.5 * g / sqrt(accum)
  s.Apply(*opt, 0.5f, 2, {1, 1, -0.5f});
  ExpectNear(s.slots[0], {a0 + 2, a0 + 5, a0 + 0.5}, "accum");
  ExpectNear(s.var,
             {1 - 0.5 / std::sqrt(a0 + 1) - 0.5 / std::sqrt(a0 + 2),
              2 + 1 / std::sqrt(a0 + 4) - 0.5 / std::sqrt(a0 + 5),
              3 - 0.25 / std::sqrt(a0 + 0.25) + 0.25 / std::sqrt(a0 + 0.5)},
             "var");
}

TEST(OptimizerTest, AdagradWithEpsilon) {
  proto::OptimizerConfig config = Config("adagrad", 0.5f);
  config.set_initial_accumulator_value(0.75f);
  config.set_epsilon(0.5f);
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  State s(*opt, {1, 2, 3});

  // accum = 0.75 + g^2 = {1, 1, 0.75 + 2.25 = 3}
  // var -= 0.5 * g / (sqrt(accum) + 0.5) = {0.25 / 1.5, -0.25 / 1.5, 0.75 / (sqrt(3) + 0.5)}
  s.Apply(*opt, 0.5f, 1, {0.5f, -0.5f, 1.5f});
  ExpectNear(s.slots[0], {1, 1, 3}, "accum");
  ExpectNear(s.var, {1 - 0.25 / 1.5, 2 + 0.25 / 1.5, 3 - 0.75 / (std::sqrt(3.0) + 0.5)}, "var");
}

TEST(OptimizerTest, AdamBiasCorrection) {
  proto::OptimizerConfig config = Config("adam", 0.5f);
  config.set_beta1(0.5f);
  config.set_beta2(0.75f);
  config.set_epsilon(0.5f);
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  State s(*opt, {1, 2, 3});

  // Step 1, g = {1, -2, 4}:
  //   m = 0.5 * 0 + 0.5 * g = {0.5, -1, 2}
  //   v = 0.75 * 0 + 0.25 * g^2 = {0.25, 1, 4}
  //   lr_t = 0.5 * sqrt(1 - 0.75) / (1 - 0.5) = 0.5 * 0.5 / 0.5 = 0.5
  //   var -= 0.5 * m / (sqrt(v) + 0.5) = 0.5 * {0.5 / 1, -1 / 1.5, 2 / 2.5} = {0.25, -1/3, 0.4}
  s.Apply(*opt, 0.5f, 1, {1, -2, 4});
  ExpectNear(s.slots[0], {0.5, -1, 2}, "m");
  ExpectNear(s.slots[1], {0.25, 1, 4}, "v");
  ExpectNear(s.var, {1 - 0.25, 2 + 1.0 / 3, 3 - 0.4}, "var");

  // Step 2, g = {1, 2, 0}:
  //   m = 0.5 * {0.5, -1, 2} + 0.5 * {1, 2, 0} = {0.75, 0.5, 1}
  //   v = 0.75 * {0.25, 1, 4} + 0.25 * {1, 4, 0} = {0.4375, 1.75, 3}
  //   lr_t = 0.5 * sqrt(1 - 0.75^2) / (1 - 0.5^2) = 0.5 * sqrt(0.4375) / 0.75
  //   var -= lr_t * m / (sqrt(v) + 0.5)
  s.Apply(*opt, 0.5f, 2, {1, 2, 0});
  ExpectNear(s.slots[0], {0.75, 0.5, 1}, "m");
  ExpectNear(s.slots[1], {0.4375, 1.75, 3}, "v");
  const double lr_t = 0.5 * std::sqrt(0.4375) / 0.75;
  ExpectNear(
      s.var,
      {0.75 - lr_t * 0.75 / (std::sqrt(0.4375) + 0.5),
       2 + 1.0 / 3 - lr_t * 0.5 / (std::sqrt(1.75) + 0.5), 2.6 - lr_t * 1 / (std::sqrt(3.0) + 0.5)},
      "var");
}

TEST(OptimizerTest, AdamDefaults) {
  std::unique_ptr<Optimizer> opt = Make(Config("adam", 0.01f));
  ASSERT_NE(opt, nullptr);
  State s(*opt, {1, 2, 3});
  // The defaults, as the floats the optimizer holds.
  const double b1 = 0.9f;
  const double b2 = 0.999f;
  const double eps = 1e-8f;
  const double lr = 0.01f;

  // Step 1: m = (1 - b1) g, v = (1 - b2) g^2, lr_t = lr * sqrt(1 - b2) / (1 - b1), so
  // var -= lr * sqrt(1 - b2) * g / (sqrt(1 - b2) |g| + eps), i.e. about lr * sign(g).
  const std::vector<double> g = {1, -2, 4};
  s.Apply(*opt, 0.01f, 1, {1, -2, 4});
  std::vector<double> expected(3);
  for (size_t i = 0; i < 3; ++i) {
    expected[i] =
        (i + 1) - lr * std::sqrt(1 - b2) * g[i] / (std::sqrt(1 - b2) * std::abs(g[i]) + eps);
  }
  ExpectNear(s.var, expected, "var");
  ExpectNear(s.var, {1 - 0.01, 2 + 0.01, 3 - 0.01}, "var ~ var - lr * sign(g)");
  ExpectNear(s.slots[0], {(1 - b1) * 1, (1 - b1) * -2, (1 - b1) * 4}, "m");
  ExpectNear(s.slots[1], {(1 - b2) * 1, (1 - b2) * 4, (1 - b2) * 16}, "v");
}

TEST(OptimizerTest, RmsProp) {
  proto::OptimizerConfig config = Config("rmsprop", 0.5f);
  config.set_beta1(0.5f);  // rho
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  ASSERT_EQ(opt->num_slots(), 2);
  State s(*opt, {1, 2, 3});
  const double eps = 1e-10f;  // the default

  // ms starts at 1: ms = 0.5 * 1 + 0.5 * g^2 = {1, 5, 0.5}
  // mom = 0 * 0 + 0.5 * g / sqrt(ms + eps) = {0.5, -1.5 / sqrt(5), 0};  var -= mom
  s.Apply(*opt, 0.5f, 1, {1, -3, 0});
  ExpectNear(s.slots[0], {1, 5, 0.5}, "ms");
  ExpectNear(s.slots[1], {0.5 / std::sqrt(1 + eps), -1.5 / std::sqrt(5 + eps), 0}, "mom");
  ExpectNear(s.var, {1 - 0.5, 2 + 1.5 / std::sqrt(5.0), 3}, "var");

  // ms = 0.5 * {1, 5, 0.5} + 0.5 * {1, 1, 4} = {1, 3, 2.25}
  // mom = 0.5 * g / sqrt(ms) = {0.5, 0.5 / sqrt(3), 1 / 1.5}
  s.Apply(*opt, 0.5f, 2, {1, 1, 2});
  ExpectNear(s.slots[0], {1, 3, 2.25}, "ms");
  ExpectNear(s.slots[1], {0.5, 0.5 / std::sqrt(3.0), 1 / 1.5}, "mom");
  ExpectNear(s.var, {0.5 - 0.5, 2 + 1.5 / std::sqrt(5.0) - 0.5 / std::sqrt(3.0), 3 - 1 / 1.5},
             "var");
}

TEST(OptimizerTest, RmsPropWithMomentum) {
  proto::OptimizerConfig config = Config("rmsprop", 0.5f);
  config.set_beta1(0.5f);  // rho
  config.set_momentum(0.5f);
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  State s(*opt, {1, 2, 3});

  // As RmsProp's step 1: ms = {1, 5, 0.5}, mom = {0.5, -1.5 / sqrt(5), 0}
  s.Apply(*opt, 0.5f, 1, {1, -3, 0});
  const double mom1[] = {0.5, -1.5 / std::sqrt(5.0), 0};
  ExpectNear(s.slots[1], {mom1[0], mom1[1], mom1[2]}, "mom");
  ExpectNear(s.var, {1 - mom1[0], 2 - mom1[1], 3 - mom1[2]}, "var");

  // ms = {1, 3, 2.25};  mom = 0.5 * mom + 0.5 * g / sqrt(ms)
  s.Apply(*opt, 0.5f, 2, {1, 1, 2});
  const double mom2[] = {0.5 * mom1[0] + 0.5, 0.5 * mom1[1] + 0.5 / std::sqrt(3.0),
                         0.5 * mom1[2] + 1 / 1.5};  // {0.75, ..., 0.6667}
  ExpectNear(s.slots[0], {1, 3, 2.25}, "ms");
  ExpectNear(s.slots[1], {mom2[0], mom2[1], mom2[2]}, "mom");
  ExpectNear(s.var, {1 - mom1[0] - mom2[0], 2 - mom1[1] - mom2[1], 3 - mom1[2] - mom2[2]}, "var");
}

TEST(OptimizerTest, RmsPropCentered) {
  proto::OptimizerConfig config = Config("rmsprop", 0.5f);
  config.set_beta1(0.5f);  // rho
  config.set_momentum(0.5f);
  config.set_centered(true);
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  ASSERT_EQ(opt->num_slots(), 3);
  State s(*opt, {1, 2, 3});

  // Step 1, g = {1, -3, 0}:
  //   ms = 0.5 * 1 + 0.5 * g^2 = {1, 5, 0.5};  mg = 0.5 * 0 + 0.5 * g = {0.5, -1.5, 0}
  //   d = ms - mg^2 = {0.75, 2.75, 0.5};  mom = 0.5 * 0 + 0.5 * g / sqrt(d)
  s.Apply(*opt, 0.5f, 1, {1, -3, 0});
  const double mom1[] = {0.5 / std::sqrt(0.75), -1.5 / std::sqrt(2.75), 0};
  ExpectNear(s.slots[0], {1, 5, 0.5}, "ms");
  ExpectNear(s.slots[1], {mom1[0], mom1[1], mom1[2]}, "mom");
  ExpectNear(s.slots[2], {0.5, -1.5, 0}, "mg");
  ExpectNear(s.var, {1 - mom1[0], 2 - mom1[1], 3 - mom1[2]}, "var");

  // Step 2, g = {1, 1, 2}:
  //   ms = {1, 3, 2.25};  mg = 0.5 * {0.5, -1.5, 0} + 0.5 * g = {0.75, -0.25, 1}
  //   d = {1 - 0.5625, 3 - 0.0625, 2.25 - 1} = {0.4375, 2.9375, 1.25}
  //   mom = 0.5 * mom + 0.5 * g / sqrt(d)
  s.Apply(*opt, 0.5f, 2, {1, 1, 2});
  const double mom2[] = {0.5 * mom1[0] + 0.5 / std::sqrt(0.4375),
                         0.5 * mom1[1] + 0.5 / std::sqrt(2.9375),
                         0.5 * mom1[2] + 1 / std::sqrt(1.25)};
  ExpectNear(s.slots[0], {1, 3, 2.25}, "ms");
  ExpectNear(s.slots[1], {mom2[0], mom2[1], mom2[2]}, "mom");
  ExpectNear(s.slots[2], {0.75, -0.25, 1}, "mg");
  ExpectNear(s.var, {1 - mom1[0] - mom2[0], 2 - mom1[1] - mom2[1], 3 - mom1[2] - mom2[2]}, "var");
}

// ---------------------------------------------------------------------------------------------
// The learning rate is an argument: a change between calls applies from the next call on.

TEST(OptimizerTest, LearningRateChangeTakesEffectMomentum) {
  proto::OptimizerConfig config = Config("momentum", 0.5f);
  config.set_momentum(0.5f);
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  State s(*opt, {1, 2, 3});

  // lr 0.5: accum = {1, -2, 4};  var -= 0.5 * accum -> {0.5, 3, 1}
  s.Apply(*opt, 0.5f, 1, {1, -2, 4});
  ExpectNear(s.var, {0.5, 3, 1}, "var");
  // lr 0.125: accum = {1.5, 1, 0};  var -= 0.125 * accum -> {0.5 - 0.1875, 3 - 0.125, 1}
  s.Apply(*opt, 0.125f, 2, {1, 2, -2});
  ExpectNear(s.var, {0.3125, 2.875, 1}, "var");
  // The config keeps the initial rate.
  EXPECT_EQ(opt->config().learning_rate(), 0.5f);
}

TEST(OptimizerTest, LearningRateChangeTakesEffectAdam) {
  proto::OptimizerConfig config = Config("adam", 0.5f);
  config.set_beta1(0.5f);
  config.set_beta2(0.75f);
  config.set_epsilon(0.5f);
  std::unique_ptr<Optimizer> opt = Make(config);
  ASSERT_NE(opt, nullptr);
  State s(*opt, {1, 2, 3});

  // Step 1 at lr 0.5, as in AdamBiasCorrection: var = {0.75, 2 + 1/3, 2.6}
  s.Apply(*opt, 0.5f, 1, {1, -2, 4});
  // Step 2 at lr 0.25: lr_t = 0.25 * sqrt(0.4375) / 0.75, m = {0.75, 0.5, 1}, v = {0.4375, 1.75, 3}
  s.Apply(*opt, 0.25f, 2, {1, 2, 0});
  const double lr_t = 0.25 * std::sqrt(0.4375) / 0.75;
  ExpectNear(
      s.var,
      {0.75 - lr_t * 0.75 / (std::sqrt(0.4375) + 0.5),
       2 + 1.0 / 3 - lr_t * 0.5 / (std::sqrt(1.75) + 0.5), 2.6 - lr_t * 1 / (std::sqrt(3.0) + 0.5)},
      "var");
}

// ---------------------------------------------------------------------------------------------
// Applying a partition in pieces (chunks of a bulk push) equals applying it whole.

class OptimizerSplitTest : public ::testing::TestWithParam<proto::OptimizerConfig> {};

TEST_P(OptimizerSplitTest, TwoHalvesEqualTheWhole) {
  std::unique_ptr<Optimizer> opt = Make(GetParam());
  ASSERT_NE(opt, nullptr);
  const std::vector<float> initial = {1, -2, 3, 0.5f, -0.25f, 4, 7};
  State whole(*opt, initial);
  State halves(*opt, initial);
  const std::vector<std::vector<float>> grads = {
      {0.5f, -1, 2, 0, 3, -0.75f, 1}, {1, 1, -1, 0.25f, -2, 0, 0.5f}, {-3, 0.1f, 0, 2, 1, 1, -1}};
  const float rates[] = {0.1f, 0.05f, 0.2f};
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<float>& g = grads[static_cast<size_t>(step - 1)];
    const float lr = rates[step - 1];
    whole.Apply(*opt, lr, step, g);
    halves.Apply(*opt, lr, step, g, 0, 3);
    halves.Apply(*opt, lr, step, g, 3, 7);
  }
  for (size_t i = 0; i < initial.size(); ++i) {
    EXPECT_FLOAT_EQ(halves.var[i], whole.var[i]) << "var[" << i << "]";
    EXPECT_NE(whole.var[i], initial[i]) << "var[" << i << "] did not move";
    for (size_t k = 0; k < whole.slots.size(); ++k) {
      EXPECT_FLOAT_EQ(halves.slots[k][i], whole.slots[k][i])
          << opt->slot_name(static_cast<int>(k)) << "[" << i << "]";
    }
  }
}

proto::OptimizerConfig WithMomentum(proto::OptimizerConfig config, float momentum,
                                    bool nesterov = false) {
  config.set_momentum(momentum);
  config.set_use_nesterov(nesterov);
  return config;
}

proto::OptimizerConfig Centered(proto::OptimizerConfig config) {
  config.set_centered(true);
  return config;
}

INSTANTIATE_TEST_SUITE_P(
    AllOptimizers, OptimizerSplitTest,
    ::testing::Values(Config("sgd", 0.1f), Config("momentum", 0.1f),
                      WithMomentum(Config("momentum", 0.1f), 0.9f, /*nesterov=*/true),
                      Config("adagrad", 0.1f), Config("adam", 0.1f), Config("rmsprop", 0.1f),
                      WithMomentum(Config("rmsprop", 0.1f), 0.5f),
                      Centered(WithMomentum(Config("rmsprop", 0.1f), 0.5f))),
    [](const ::testing::TestParamInfo<proto::OptimizerConfig>& param_info) {
      std::string name = param_info.param.name();
      if (param_info.param.use_nesterov()) name += "_nesterov";
      if (param_info.param.name() == "rmsprop" && param_info.param.momentum() != 0)
        name += "_momentum";
      if (param_info.param.centered()) name += "_centered";
      return name;
    });

// ---------------------------------------------------------------------------------------------
// Defaults, slots.

TEST(OptimizerTest, SgdConfigUnchanged) {
  std::unique_ptr<Optimizer> opt = Make(Config("sgd", 0.25f));
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->config().name(), "sgd");
  EXPECT_EQ(opt->config().learning_rate(), 0.25f);
  EXPECT_EQ(opt->config().momentum(), 0.0f);
  EXPECT_EQ(opt->config().epsilon(), 0.0f);
}

TEST(OptimizerTest, MomentumDefaults) {
  std::unique_ptr<Optimizer> opt = Make(Config("momentum", 0.25f));
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->config().learning_rate(), 0.25f);
  EXPECT_EQ(opt->config().momentum(), 0.9f);
  EXPECT_FALSE(opt->config().use_nesterov());
  ASSERT_EQ(opt->num_slots(), 1);
  EXPECT_STREQ(opt->slot_name(0), "momentum");
  EXPECT_EQ(opt->slot_initial_value(0), 0.0f);

  proto::OptimizerConfig config = Config("momentum", 0.25f);
  config.set_momentum(0.5f);
  opt = Make(config);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->config().momentum(), 0.5f);  // given values are kept
}

TEST(OptimizerTest, AdagradDefaults) {
  std::unique_ptr<Optimizer> opt = Make(Config("adagrad", 0.25f));
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->config().initial_accumulator_value(), 0.1f);
  EXPECT_EQ(opt->config().epsilon(), 0.0f);  // TF1 has none
  ASSERT_EQ(opt->num_slots(), 1);
  EXPECT_STREQ(opt->slot_name(0), "accumulator");
  EXPECT_EQ(opt->slot_initial_value(0), 0.1f);

  proto::OptimizerConfig config = Config("adagrad", 0.25f);
  config.set_initial_accumulator_value(2.0f);
  config.set_epsilon(1e-7f);
  opt = Make(config);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->config().initial_accumulator_value(), 2.0f);
  EXPECT_EQ(opt->config().epsilon(), 1e-7f);
  EXPECT_EQ(opt->slot_initial_value(0), 2.0f);
}

TEST(OptimizerTest, AdamDefaultsFilledIn) {
  std::unique_ptr<Optimizer> opt = Make(Config("adam", 0.25f));
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->config().beta1(), 0.9f);
  EXPECT_EQ(opt->config().beta2(), 0.999f);
  EXPECT_EQ(opt->config().epsilon(), 1e-8f);
  ASSERT_EQ(opt->num_slots(), 2);
  EXPECT_STREQ(opt->slot_name(0), "m");
  EXPECT_STREQ(opt->slot_name(1), "v");
  EXPECT_EQ(opt->slot_initial_value(0), 0.0f);
  EXPECT_EQ(opt->slot_initial_value(1), 0.0f);

  proto::OptimizerConfig config = Config("adam", 0.25f);
  config.set_beta1(0.8f);
  config.set_beta2(0.99f);
  config.set_epsilon(1e-3f);
  opt = Make(config);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->config().beta1(), 0.8f);
  EXPECT_EQ(opt->config().beta2(), 0.99f);
  EXPECT_EQ(opt->config().epsilon(), 1e-3f);
}

TEST(OptimizerTest, RmsPropDefaults) {
  std::unique_ptr<Optimizer> opt = Make(Config("rmsprop", 0.25f));
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->config().beta1(), 0.9f);  // rho
  EXPECT_EQ(opt->config().momentum(), 0.0f);
  EXPECT_EQ(opt->config().epsilon(), 1e-10f);
  EXPECT_FALSE(opt->config().centered());
  ASSERT_EQ(opt->num_slots(), 2);
  EXPECT_STREQ(opt->slot_name(0), "rms");
  EXPECT_STREQ(opt->slot_name(1), "momentum");
  EXPECT_EQ(opt->slot_initial_value(0), 1.0f);  // TF1's ms starts at 1
  EXPECT_EQ(opt->slot_initial_value(1), 0.0f);

  proto::OptimizerConfig config = Config("rmsprop", 0.25f);
  config.set_centered(true);
  opt = Make(config);
  ASSERT_NE(opt, nullptr);
  EXPECT_TRUE(opt->config().centered());
  ASSERT_EQ(opt->num_slots(), 3);
  EXPECT_STREQ(opt->slot_name(2), "mg");
  EXPECT_EQ(opt->slot_initial_value(2), 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Validation: INVALID_ARGUMENT, the message naming the field and the value.

void ExpectInvalid(const proto::OptimizerConfig& config, const std::string& field,
                   const std::string& value) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(config);
  ASSERT_FALSE(optimizer.ok()) << config.ShortDebugString();
  EXPECT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(optimizer.status().message(), HasSubstr(field)) << config.ShortDebugString();
  EXPECT_THAT(optimizer.status().message(), HasSubstr(value)) << config.ShortDebugString();
}

TEST(OptimizerValidationTest, UnknownName) {
  ExpectInvalid(Config("adamw", 0.1f), "name", "adamw");
  ExpectInvalid(Config("SGD", 0.1f), "name", "SGD");
  ExpectInvalid(Config("", 0.1f), "name", "\"\"");
  // The message lists the known names.
  absl::Status status = MakeOptimizer(Config("adamw", 0.1f)).status();
  for (const char* known : {"sgd", "momentum", "adagrad", "adam", "rmsprop"}) {
    EXPECT_THAT(status.message(), HasSubstr(known));
  }
}

TEST(OptimizerValidationTest, LearningRate) {
  for (const char* name : {"sgd", "momentum", "adagrad", "adam", "rmsprop"}) {
    SCOPED_TRACE(name);
    ExpectInvalid(Config(name, 0), "learning_rate", "got 0");
    ExpectInvalid(Config(name, -0.5f), "learning_rate", "got -0.5");
    ExpectInvalid(Config(name, kNaN), "learning_rate", "got nan");
    ExpectInvalid(Config(name, kInf), "learning_rate", "got inf");
  }
}

TEST(OptimizerValidationTest, Momentum) {
  for (const char* name : {"momentum", "rmsprop"}) {
    SCOPED_TRACE(name);
    ExpectInvalid(WithMomentum(Config(name, 0.1f), 1.0f), "momentum", "got 1");
    ExpectInvalid(WithMomentum(Config(name, 0.1f), 1.5f), "momentum", "got 1.5");
    ExpectInvalid(WithMomentum(Config(name, 0.1f), -0.25f), "momentum", "got -0.25");
    ExpectInvalid(WithMomentum(Config(name, 0.1f), kNaN), "momentum", "got nan");
  }
  EXPECT_TRUE(MakeOptimizer(WithMomentum(Config("momentum", 0.1f), 0.99f)).ok());
}

TEST(OptimizerValidationTest, AdamBetas) {
  proto::OptimizerConfig config = Config("adam", 0.1f);
  config.set_beta1(1.0f);
  ExpectInvalid(config, "beta1", "got 1");
  config.set_beta1(-0.5f);
  ExpectInvalid(config, "beta1", "got -0.5");
  config.set_beta1(0.9f);
  config.set_beta2(1.0f);
  ExpectInvalid(config, "beta2", "got 1");
  config.set_beta2(-0.5f);
  ExpectInvalid(config, "beta2", "got -0.5");
  config.set_beta2(kNaN);
  ExpectInvalid(config, "beta2", "got nan");
}

TEST(OptimizerValidationTest, RmsPropDecay) {
  proto::OptimizerConfig config = Config("rmsprop", 0.1f);
  config.set_beta1(1.0f);
  ExpectInvalid(config, "beta1", "got 1");
  config.set_beta1(-0.5f);
  ExpectInvalid(config, "rho", "got -0.5");
}

TEST(OptimizerValidationTest, Epsilon) {
  for (const char* name : {"adagrad", "adam", "rmsprop"}) {
    SCOPED_TRACE(name);
    proto::OptimizerConfig config = Config(name, 0.1f);
    config.set_epsilon(-1e-8f);
    ExpectInvalid(config, "epsilon", "got -1e-08");
    config.set_epsilon(kInf);
    ExpectInvalid(config, "epsilon", "got inf");
    config.set_epsilon(kNaN);
    ExpectInvalid(config, "epsilon", "got nan");
  }
}

TEST(OptimizerValidationTest, AdagradInitialAccumulator) {
  proto::OptimizerConfig config = Config("adagrad", 0.1f);
  config.set_initial_accumulator_value(-0.5f);
  ExpectInvalid(config, "initial_accumulator_value", "got -0.5");
  config.set_epsilon(1e-7f);  // negative is an error with or without epsilon
  ExpectInvalid(config, "initial_accumulator_value", "got -0.5");
  config.set_initial_accumulator_value(kNaN);
  ExpectInvalid(config, "initial_accumulator_value", "got nan");
  // 0 means the default, with or without epsilon.
  config.set_initial_accumulator_value(0);
  config.set_epsilon(0);
  EXPECT_TRUE(MakeOptimizer(config).ok());
}

// A momentum accumulator decayed into the denormal range is read as zero and the update writes
// zeros, not denormals (flush to zero), and the caller's floating-point mode is left alone: the
// same denormal arithmetic outside Apply keeps its denormal result.
TEST(OptimizerTest, DenormalSlotsAreFlushedToZero) {
#if defined(__x86_64__) || defined(__aarch64__)
  proto::OptimizerConfig config = Config("momentum", 1.0f);
  config.set_momentum(0.5f);
  std::unique_ptr<Optimizer> optimizer = Make(config);
  ASSERT_NE(optimizer, nullptr);
  constexpr float kDenormal = 1e-39f;
  volatile float outside = kDenormal;
  ASSERT_EQ(std::fpclassify(outside), FP_SUBNORMAL);
  State state(*optimizer, {1.0f, 2.0f});
  state.slots[0] = {kDenormal, 2e-38f};
  state.Apply(*optimizer, 1.0f, 1, {0.0f, 0.0f});
  EXPECT_EQ(state.slots[0][0], 0.0f);  // 0.5 * (denormal read as 0) + 0
  EXPECT_EQ(state.slots[0][1], 0.0f);  // 0.5 * 2e-38 = 1e-38, a denormal result written as 0
  EXPECT_EQ(state.var[0], 1.0f);
  EXPECT_EQ(state.var[1], 2.0f);
  volatile float half = 0.5f;
  EXPECT_EQ(std::fpclassify(outside * half), FP_SUBNORMAL);
#else
  GTEST_SKIP() << "no flush-to-zero control on this architecture";
#endif
}

}  // namespace
}  // namespace psflow
