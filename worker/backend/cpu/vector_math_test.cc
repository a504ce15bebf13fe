#include "worker/backend/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace psflow::cpu {
namespace {

TEST(VectorMath, ExpWithinTwoUlpOfTheExactValue) {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.0037) {
    const float xf = static_cast<float>(x);
    const double exact = std::exp(static_cast<double>(xf));
    const double ulp =
        std::nextafter(static_cast<float>(exact), INFINITY) - static_cast<float>(exact);
    worst = std::max(worst, std::abs(Exp(xf) - exact) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(Exp(0.0f), 1.0f);
}

TEST(VectorMath, ExpSaturatesInsteadOfOverflowing) {
  EXPECT_GE(Exp(-1000.0f), 0.0f);
  EXPECT_LT(Exp(-1000.0f), 2e-38f);
  EXPECT_TRUE(std::isfinite(Exp(1000.0f)));
  EXPECT_GT(Exp(1000.0f), 1e38f);
}

TEST(VectorMath, SigmoidAndTanhWithinTwoTenMillionths) {
  double sigmoid_error = 0, tanh_error = 0;
  for (double x = -30.0; x <= 30.0; x += 0.00123) {
    const float xf = static_cast<float>(x);
    const double xd = xf;
    sigmoid_error = std::max(sigmoid_error, std::abs(Sigmoid(xf) - 1.0 / (1.0 + std::exp(-xd))));
    tanh_error = std::max(tanh_error, std::abs(Tanh(xf) - std::tanh(xd)));
  }
  EXPECT_LE(sigmoid_error, 2e-7);
  EXPECT_LE(tanh_error, 2e-7);
  EXPECT_EQ(Tanh(50.0f), 1.0f);
  EXPECT_EQ(Tanh(-50.0f), -1.0f);
  EXPECT_LT(Sigmoid(-200.0f), 1e-38f);
  EXPECT_EQ(Sigmoid(200.0f), 1.0f);
}

TEST(VectorMath, ArrayKernelsOnEveryTailLength) {
  for (int64_t n = 1; n <= 37; ++n) {
    SCOPED_TRACE(n);
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7) % 11) - 5.0f;
    v[n / 2] = 9.5f;
    EXPECT_EQ(MaxOf(v.data(), n), 9.5f);
    double sum = 0;
    for (float x : v) sum += x;
    EXPECT_EQ(SumOf(v.data(), n), sum);
    std::vector<float> e(v.size());
    ExpOf(v.data(), n, 9.5f, e.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(e[i], Exp(v[i] - 9.5f));
    double exp_sum = 0;
    for (float x : e) exp_sum += x;
    EXPECT_NEAR(SumOfExp(v.data(), n, 9.5f), exp_sum, 1e-12);
    // Three rows of n: the column sums added to what is there.
    std::vector<float> rows(3 * v.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i % 5);
    std::vector<float> sums(v.size(), 1.0f);
    AddColumnSums(rows.data(), 3, n, sums.data());
    for (int64_t k = 0; k < n; ++k) {
      EXPECT_EQ(sums[k], 1.0f + rows[k] + rows[n + k] + rows[2 * n + k]);
    }
  }
}

}  // namespace
}  // namespace psflow::cpu
