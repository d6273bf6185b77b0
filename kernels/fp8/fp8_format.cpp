#include "kernels/fp8/fp8_format.h"

#include <bit>
#include <cmath>
#include <limits>

namespace ustrain::fp8 {
namespace {

struct Layout {
  int mantissa_bits, bias;
  float max;
  bool has_infinity;
};

constexpr Layout layout_of(Format f) {
  return f == Format::e4m3 ? Layout{3, 7, 448.0f, false} : Layout{2, 15, 57344.0f, true};
}

// |x| (finite, below 2 * max) rounded to the format's precision: normal numbers keep
// `mantissa_bits` bits (rounding on the float's own bits, a carry moving into the exponent),
// numbers below the smallest normal keep multiples of the smallest subnormal.
float round_magnitude(const Layout& l, float a) {
  const float min_normal = std::ldexp(1.0f, 1 - l.bias);
  if (a < min_normal) {
    // Adding 1.5 * 2^(23 + e) makes the float adder round at quantum 2^e, ties to even.
    const float magic = std::ldexp(1.5f, 23 + 1 - l.bias - l.mantissa_bits);
    return (a + magic) - magic;
  }
  const int drop = 23 - l.mantissa_bits;
  std::uint32_t u = std::bit_cast<std::uint32_t>(a);
  u += (1u << (drop - 1)) - 1u + ((u >> drop) & 1u);
  return std::bit_cast<float>(u & ~((1u << drop) - 1u));
}

}  // namespace

const char* format_name(Format f) { return f == Format::e4m3 ? "e4m3" : "e5m2"; }

float max_finite(Format f) { return layout_of(f).max; }

float decode(Format f, std::uint8_t code) {
  const Layout l = layout_of(f);
  const int exp_bits = 7 - l.mantissa_bits;
  const int exp_field = (code >> l.mantissa_bits) & ((1 << exp_bits) - 1);
  const int mant = code & ((1 << l.mantissa_bits) - 1);
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const int exp_all = (1 << exp_bits) - 1;
  if (l.has_infinity && exp_field == exp_all)
    return mant == 0 ? sign * std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  if (!l.has_infinity && exp_field == exp_all && mant == (1 << l.mantissa_bits) - 1)
    return std::numeric_limits<float>::quiet_NaN();
  if (exp_field == 0) return sign * std::ldexp(static_cast<float>(mant), 1 - l.bias - l.mantissa_bits);
  return sign * std::ldexp(static_cast<float>(mant + (1 << l.mantissa_bits)), exp_field - l.bias - l.mantissa_bits);
}

float round_to(Format f, float x, bool saturate) {
  const Layout l = layout_of(f);
  if (std::isnan(x)) return x;
  const float a = std::fabs(x);
  float r;
  if (std::isinf(a) || a >= 2.0f * l.max) {
    r = std::numeric_limits<float>::infinity();
  } else {
    r = round_magnitude(l, a);
  }
  if (r > l.max) {
    if (saturate) r = l.max;
    else if (!l.has_infinity) return std::numeric_limits<float>::quiet_NaN();
    else r = std::numeric_limits<float>::infinity();
  }
  return std::copysign(r, x);
}

std::uint8_t encode(Format f, float x, bool saturate) {
  const Layout l = layout_of(f);
  const float r = round_to(f, x, saturate);
  if (std::isnan(r)) return 0x7f;  // e4m3's NaN, and a quiet NaN of e5m2
  const std::uint8_t sign = std::signbit(r) ? 0x80 : 0x00;
  const float a = std::fabs(r);
  const int exp_bits = 7 - l.mantissa_bits;
  if (std::isinf(a)) return static_cast<std::uint8_t>(sign | (((1 << exp_bits) - 1) << l.mantissa_bits));
  if (a < std::ldexp(1.0f, 1 - l.bias))  // zero or subnormal: a multiple of the smallest subnormal
    return static_cast<std::uint8_t>(sign | static_cast<int>(std::ldexp(a, l.bias - 1 + l.mantissa_bits)));
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  const int mant = static_cast<int>(std::ldexp(m, l.mantissa_bits + 1)) - (1 << l.mantissa_bits);
  return static_cast<std::uint8_t>(sign | ((e - 1 + l.bias) << l.mantissa_bits) | mant);
}

}  // namespace ustrain::fp8
