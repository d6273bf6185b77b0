// Inner-loop helpers shared by the CPU ops: a vectorisable exp, and reductions that keep
// several independent partial sums (so the compiler can use SIMD without -ffast-math) and
// combine them in a fixed order (so the result never depends on threading).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ustrain::cpu {

// e^x for float, within 2 ulp of std::exp for x in [-87.3, 88.3]; 0 below that range,
// +inf above it, NaN for NaN. Unlike std::exp it inlines into SIMD loops (glibc's vector
// exp needs -ffast-math). Written without float selects: under the default trapping-math
// rules GCC will not vectorise a loop whose float arithmetic depends on a select.
inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // few mantissa bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kMin = -87.3f;
  constexpr float kMax = 88.3f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  // x = n ln2 + r with n = round(x log2e), |r| <= ln2 / 2; n also sits in shifted's low bits.
  const float shifted = x * kLog2e + kRound;
  const float n = shifted - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  // Taylor series to degree 7: the remainder r^8 / 8! is below float precision.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::uint32_t n_bits = std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(kRound);
  const float y = p * std::bit_cast<float>((n_bits + 127u) << 23);  // p * 2^n
  // Out of range, y is garbage: replace it by 0 or +inf with bit masks.
  const std::uint32_t under = x < kMin ? ~0u : 0u;
  const std::uint32_t over = x > kMax ? ~0u : 0u;
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(y) & ~(under | over)) | (over & 0x7F800000u));
}

inline float sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

// Number of independent partial sums: one AVX-512 register of floats, two of doubles.
constexpr int kLanes = 16;

template <class Acc>
inline Acc combine_lanes(const Acc (&acc)[kLanes]) {
  Acc total = 0;
  for (int l = 0; l < kLanes; ++l) total += acc[l];
  return total;
}

// sum a[i] * b[i] in double.
inline double dot(const float* a, const float* b, std::int64_t n) {
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(a[i + l]) * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += static_cast<double>(a[i]) * b[i];
  return combine_lanes(acc);
}

// sum x[i]^2 in double: the dot product of x with itself, the same products in the same order.
inline double sum_squares(const float* x, std::int64_t n) { return dot(x, x, n); }

// max x[i]; n >= 1.
inline float max_of(const float* x, std::int64_t n) {
  float acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = x[0];
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  for (int l = 0; i < n; ++i, ++l) acc[l] = x[i] > acc[l] ? x[i] : acc[l];
  float m = acc[0];
  for (int l = 1; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  return m;
}

// sum exp(x[i] - shift) in double.
inline double sum_exp(const float* x, std::int64_t n, float shift) {
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += fast_exp(x[i + l] - shift);
  for (int l = 0; i < n; ++i, ++l) acc[l] += fast_exp(x[i] - shift);
  return combine_lanes(acc);
}

// x[i] = exp(x[i] - shift) for i < n; returns their sum (in double).
inline double exp_in_place(float* x, std::int64_t n, float shift) {
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      x[i + l] = fast_exp(x[i + l] - shift);
      acc[l] += x[i + l];
    }
  for (int l = 0; i < n; ++i, ++l) {
    x[i] = fast_exp(x[i] - shift);
    acc[l] += x[i];
  }
  return combine_lanes(acc);
}

}  // namespace ustrain::cpu
