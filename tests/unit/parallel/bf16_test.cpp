// bf16 conversions and the reduction kernel the MPI backend sums bf16 with.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "parallel/comm/bf16.h"

namespace ustrain {
namespace {

TEST(Bf16, ConvertsExactValuesBothWays) {
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65280.0f, 0x1p-126f}) {
    EXPECT_EQ(bf16::to_float(bf16::from_float(x)), x) << x;
  }
  EXPECT_EQ(bf16::from_float(1.0f), 0x3f80);
  EXPECT_EQ(bf16::from_float(-2.0f), 0xc000);
}

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(bf16::to_float(bf16::from_float(1.0f + 0x1p-8f)), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: the even one is 1 + 2^-6.
  EXPECT_EQ(bf16::to_float(bf16::from_float(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  // Just above the halfway point rounds up.
  EXPECT_EQ(bf16::to_float(bf16::from_float(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  // The largest finite floats overflow to infinity, as rounding says.
  EXPECT_TRUE(std::isinf(bf16::to_float(bf16::from_float(std::numeric_limits<float>::max()))));
}

TEST(Bf16, KeepsNanAndInfinity) {
  EXPECT_TRUE(std::isnan(bf16::to_float(bf16::from_float(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lives only in the low bits must not round to infinity.
  const float low_payload_nan = std::bit_cast<float>(0x7f800001u);
  EXPECT_TRUE(std::isnan(bf16::to_float(bf16::from_float(low_payload_nan))));
  EXPECT_EQ(bf16::to_float(bf16::from_float(-std::numeric_limits<float>::infinity())),
            -std::numeric_limits<float>::infinity());
}

TEST(Bf16, SumAddsInFloatAndRoundsOnce) {
  const std::vector<float> a = {1.0f, 256.0f, -3.5f, 0.0f};
  const std::vector<float> b = {0x1p-8f + 0x1p-9f, 1.0f, 3.5f, -0.0f};
  std::vector<std::uint16_t> in, inout;
  for (float x : a) in.push_back(bf16::from_float(x));
  for (float x : b) inout.push_back(bf16::from_float(x));
  bf16::sum_into(in.data(), inout.data(), 4);
  // 1 + 0.005859375 = 1.005859375 rounds to 1 + 2^-7 (nearest); 256 + 1 = 257 is not a
  // bf16 (8 significant bits) and ties to even 256; -3.5 + 3.5 = 0.
  EXPECT_EQ(bf16::to_float(inout[0]), 1.0f + 0x1p-7f);
  EXPECT_EQ(bf16::to_float(inout[1]), 256.0f);
  EXPECT_EQ(bf16::to_float(inout[2]), 0.0f);
  EXPECT_EQ(bf16::to_float(inout[3]), 0.0f);
}

TEST(Bf16, DivideRoundsTheQuotient) {
  std::vector<std::uint16_t> v = {bf16::from_float(3.0f), bf16::from_float(-1.0f)};
  bf16::divide(v.data(), 2, 3.0f);
  EXPECT_EQ(bf16::to_float(v[0]), 1.0f);
  // 1/3 = 0.0101010101...b: bf16 keeps 8 significant bits, 0x3eab (0.333984375).
  EXPECT_EQ(v[1], 0xbeab);
}

}  // namespace
}  // namespace ustrain
