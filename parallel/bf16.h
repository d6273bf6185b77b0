// bfloat16 on the host: conversions and the element-wise kernels the MPI backend reduces
// with. MPI has no bf16 type, so a bf16 sum adds in f32 and rounds each partial sum back to
// bf16 (round to nearest even), exactly as a bf16 reduction on the GPU does.
#pragma once

#include <bit>
#include <cstdint>

namespace ustrain::bf16 {

inline float to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

inline std::uint16_t from_float(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);   // ties to even
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

// inout[i] = bf16(in[i] + inout[i])
void sum_into(const std::uint16_t* in, std::uint16_t* inout, std::int64_t n);
// data[i] = bf16(data[i] / divisor)
void divide(std::uint16_t* data, std::int64_t n, float divisor);

}  // namespace ustrain::bf16
