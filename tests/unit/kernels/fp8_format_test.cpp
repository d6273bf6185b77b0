// e4m3 and e5m2 (kernels/fp8/fp8_format.h) against a float64 model of the formats: every
// code's value, round to nearest with ties to the even code, subnormals, saturation and
// overflow, NaN and infinities; and the vectorisable rounding against the reference one.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/fp8/fp8_format.h"

namespace ustrain::fp8 {
namespace {

struct Model {
  int mantissa, bias;
  bool ieee;  // e5m2: infinities and IEEE NaNs; e4m3: only S.1111.111 is NaN
};
Model model_of(Format f) { return f == Format::e4m3 ? Model{3, 7, false} : Model{2, 15, true}; }

bool is_nan_code(Format f, std::uint8_t c) {
  const Model m = model_of(f);
  const int e = (c & 0x7f) >> m.mantissa, frac = c & ((1 << m.mantissa) - 1), all = (1 << (7 - m.mantissa)) - 1;
  return m.ieee ? (e == all && frac != 0) : (c & 0x7f) == 0x7f;
}
bool is_inf_code(Format f, std::uint8_t c) {
  const Model m = model_of(f);
  return m.ieee && (c & 0x7f) == (((1 << (7 - m.mantissa)) - 1) << m.mantissa);
}

double value_of(Format f, std::uint8_t c) {  // finite codes, exact in float64
  const Model m = model_of(f);
  const int e = (c & 0x7f) >> m.mantissa, frac = c & ((1 << m.mantissa) - 1);
  const double v = e == 0 ? std::ldexp(frac, 1 - m.bias - m.mantissa)
                          : std::ldexp((1 << m.mantissa) + frac, e - m.bias - m.mantissa);
  return (c & 0x80) ? -v : v;
}

// The non-negative finite values, ascending (codes 0.. are ordered), with their codes.
std::vector<std::pair<double, std::uint8_t>> positives(Format f) {
  std::vector<std::pair<double, std::uint8_t>> v;
  for (int c = 0; c < 0x80; ++c)
    if (!is_nan_code(f, static_cast<std::uint8_t>(c)) && !is_inf_code(f, static_cast<std::uint8_t>(c)))
      v.emplace_back(value_of(f, static_cast<std::uint8_t>(c)), static_cast<std::uint8_t>(c));
  return v;
}

// The float64 model of a conversion: nearest value, ties to the even code; beyond the largest
// the next binade's first value (even) competes as "overflow".
float reference_round(Format f, double x, bool saturate) {
  if (std::isnan(x)) return std::numeric_limits<float>::quiet_NaN();
  const auto values = positives(f);
  const double max = values.back().first;
  const double a = std::fabs(x);
  const double above = max + (max - values[values.size() - 2].first);  // the value past the largest
  double best = 0;
  bool overflow = false;
  if (std::isinf(a) || a > above) {
    overflow = true;
  } else {
    double best_d = std::numeric_limits<double>::infinity();
    int best_code = 0;
    for (const auto& [v, c] : values) {
      const double d = std::fabs(a - v);
      if (d < best_d || (d == best_d && (c & 1) == 0)) best_d = d, best = v, best_code = c;
    }
    const double d_above = above - a;
    // `above` has an even code when the largest's is odd (its mantissa all ones + 1).
    if (d_above < best_d || (d_above == best_d && (best_code & 1) == 1)) overflow = true;
  }
  if (overflow) {
    if (saturate) best = max;
    else return model_of(f).ieee ? static_cast<float>(std::copysign(INFINITY, x)) : std::numeric_limits<float>::quiet_NaN();
  } else if (saturate && a > max) {
    best = max;
  }
  return static_cast<float>(std::copysign(best, x));
}

bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// Inputs that probe every rounding case: each value, the midpoints between neighbours (ties)
// and a hair either side, subnormals, beyond the largest, infinities, NaN and random values.
std::vector<float> probes(Format f) {
  std::vector<float> xs{0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(), 1e-30f, 1e30f,
                        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
  const auto v = positives(f);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double lo = v[i].first, hi = i + 1 < v.size() ? v[i + 1].first : 2 * lo;
    for (double x : {lo, (lo + hi) / 2, hi * 1.5 - lo * 0.5}) {
      const auto fx = static_cast<float>(x);
      for (float y : {fx, std::nextafter(fx, 0.0f), std::nextafter(fx, INFINITY)}) {
        xs.push_back(y);
        xs.push_back(-y);
      }
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> exponent(-24.0, 20.0);
  for (int i = 0; i < 20000; ++i) {
    const auto x = static_cast<float>(std::exp2(exponent(rng)));
    xs.push_back(i % 2 ? -x : x);
  }
  return xs;
}

class Fp8Format : public ::testing::TestWithParam<Format> {};

TEST_P(Fp8Format, DecodesEveryCode) {
  const Format f = GetParam();
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const float got = decode(f, code);
    if (is_nan_code(f, code)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else if (is_inf_code(f, code)) {
      EXPECT_TRUE(std::isinf(got) && std::signbit(got) == ((c & 0x80) != 0)) << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), value_of(f, code)) << c;
      EXPECT_EQ(encode(f, got, false), code) << c;  // every value encodes to its code
    }
  }
  EXPECT_EQ(max_finite(f), f == Format::e4m3 ? 448.0f : 57344.0f);
  EXPECT_EQ(static_cast<double>(decode(f, 0x01)), f == Format::e4m3 ? std::ldexp(1.0, -9) : std::ldexp(1.0, -16));
}

TEST_P(Fp8Format, RoundsToNearestEvenAsTheFloat64Model) {
  const Format f = GetParam();
  for (const bool saturate : {false, true})
    for (const float x : probes(f)) {
      const float want = reference_round(f, x, saturate);
      ASSERT_TRUE(same(round_to(f, x, saturate), want))
          << format_name(f) << " saturate " << saturate << " x " << x << " got " << round_to(f, x, saturate)
          << " want " << want;
      ASSERT_TRUE(same(decode(f, encode(f, x, saturate)), want)) << format_name(f) << " x " << x;
    }
}

TEST_P(Fp8Format, BranchlessRoundingMatchesTheReference) {
  const Format f = GetParam();
  for (const float x : probes(f)) {
    const float got = f == Format::e4m3 ? round_saturating<Format::e4m3>(x) : round_saturating<Format::e5m2>(x);
    ASSERT_TRUE(same(got, round_to(f, x, true))) << format_name(f) << " x " << x << " got " << got;
  }
}

TEST_P(Fp8Format, SaturationOverflowNanAndInfinity) {
  const Format f = GetParam();
  const float max = max_finite(f);
  EXPECT_EQ(round_to(f, 1e6f, true), max);
  EXPECT_EQ(round_to(f, -INFINITY, true), -max);  // CUDA's __NV_SATFINITE
  EXPECT_TRUE(std::isnan(round_to(f, std::numeric_limits<float>::quiet_NaN(), true)));
  if (f == Format::e4m3) {
    EXPECT_EQ(round_to(f, 464.0f, false), 448.0f);  // the tie goes to 448 (even)
    EXPECT_TRUE(std::isnan(round_to(f, 465.0f, false)));  // no infinity: overflow is NaN
    EXPECT_EQ(encode(f, INFINITY, false), 0x7f);
  } else {
    EXPECT_EQ(round_to(f, 61439.0f, false), 57344.0f);
    EXPECT_TRUE(std::isinf(round_to(f, 61440.0f, false)));  // the tie goes up to the even 2^16
    EXPECT_EQ(encode(f, INFINITY, false), 0x7c);
    EXPECT_EQ(encode(f, -INFINITY, false), 0xfc);
  }
  // Half the smallest subnormal is a tie with zero (even): it rounds to zero, a hair more up.
  const float tiny = decode(f, 0x01);
  EXPECT_EQ(round_to(f, tiny / 2, true), 0.0f);
  EXPECT_EQ(round_to(f, std::nextafter(tiny / 2, 1.0f), true), tiny);
  EXPECT_EQ(round_to(f, tiny * 1.5f, true), tiny * 2);  // tie between codes 1 and 2: even
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Format, ::testing::Values(Format::e4m3, Format::e5m2),
                         [](const auto& info) { return std::string(format_name(info.param)); });

}  // namespace
}  // namespace ustrain::fp8
