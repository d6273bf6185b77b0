// The two FP8 formats of the OCP 8-bit floating-point specification, as NVIDIA's Hopper
// tensor cores take them:
//   e4m3 (E4M3FN): bias 7, 3 mantissa bits, largest 448, smallest subnormal 2^-9, no infinity,
//                  NaN = S.1111.111;
//   e5m2:          bias 15, 2 mantissa bits, largest 57344, smallest subnormal 2^-16, IEEE-like
//                  infinities and NaNs.
// Conversion from float32 rounds to nearest, ties to even. Saturating conversion (CUDA's
// __NV_SATFINITE, what training casts use) takes every finite or infinite value beyond the
// largest to +-largest; the plain conversion overflows to NaN (e4m3) or infinity (e5m2).
// NaN stays NaN.
#pragma once

#include <bit>
#include <cstdint>

namespace ustrain::fp8 {

enum class Format : std::uint8_t { e4m3, e5m2 };

const char* format_name(Format f);
float max_finite(Format f);  // 448 or 57344

// The float32 value of an FP8 code.
float decode(Format f, std::uint8_t code);
// The FP8 code nearest x (ties to even).
std::uint8_t encode(Format f, float x, bool saturate);
// decode(encode(x)) without the code: x rounded to the nearest FP8 value, as a float.
float round_to(Format f, float x, bool saturate);

// round_to(F, x, saturate = true) without branches, for loops the compiler vectorises.
template <Format F>
inline float round_saturating(float x) {
  constexpr int kMantissa = F == Format::e4m3 ? 3 : 2;
  constexpr int kBias = F == Format::e4m3 ? 7 : 15;
  constexpr float kMax = F == Format::e4m3 ? 448.0f : 57344.0f;
  constexpr float kMinNormal = 1.0f / static_cast<float>(1u << (kBias - 1));
  // 1.5 * 2^(23 + 1 - bias - mantissa): adding it rounds at the smallest subnormal's quantum.
  constexpr float kMagic = 1.5f * static_cast<float>(1u << (23 + 1 - kBias - kMantissa));
  constexpr int kDrop = 23 - kMantissa;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = u & 0x80000000u;
  float a = std::bit_cast<float>(u & 0x7fffffffu);
  a = a > kMax ? kMax : a;  // saturate (infinities too); NaN stays NaN
  std::uint32_t b = std::bit_cast<std::uint32_t>(a);
  b = (b + (1u << (kDrop - 1)) - 1u + ((b >> kDrop) & 1u)) & ~((1u << kDrop) - 1u);  // normal: ties to even
  const float normal = std::bit_cast<float>(b);
  const float subnormal = (a + kMagic) - kMagic;
  const float r = a < kMinNormal ? subnormal : normal;
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(r) | sign);
}

}  // namespace ustrain::fp8
