// The vectorisable exp used by softmax, cross-entropy and SwiGLU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_math.h"

namespace ustrain {
namespace {

TEST(FastExp, WithinTwoUlpOfExpOverTheNormalRange) {
  double worst = 0.0;
  for (double x = -87.3; x <= 88.3; x += 1.7e-3) {
    const float xf = static_cast<float>(x);
    const double want = std::exp(static_cast<double>(xf));
    worst = std::max(worst, std::abs(cpu::fast_exp(xf) - want) / want);
  }
  EXPECT_LT(worst, std::numeric_limits<float>::epsilon());  // at most 2 ulp anywhere in a binade
}

TEST(FastExp, ExactAtZeroAndSaturatesOutsideTheRange) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::fast_exp(0.0f), 1.0f);
  EXPECT_EQ(cpu::fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(cpu::fast_exp(-1e30f), 0.0f);
  EXPECT_EQ(cpu::fast_exp(-kInf), 0.0f);
  EXPECT_EQ(cpu::fast_exp(100.0f), kInf);
  EXPECT_EQ(cpu::fast_exp(kInf), kInf);
  EXPECT_TRUE(std::isnan(cpu::fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastExp, SigmoidIsBoundedAndSymmetric) {
  for (float x : {-200.0f, -30.0f, -1.5f, 0.0f, 0.25f, 7.0f, 200.0f}) {
    const float s = cpu::sigmoid(x);
    EXPECT_GE(s, 0.0f);
    EXPECT_LE(s, 1.0f);
    EXPECT_NEAR(s + cpu::sigmoid(-x), 1.0, 1e-7) << x;
    EXPECT_NEAR(s, 1.0 / (1.0 + std::exp(-static_cast<double>(x))), 1e-7) << x;
  }
}

}  // namespace
}  // namespace ustrain
