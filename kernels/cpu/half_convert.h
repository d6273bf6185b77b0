// bf16 and fp16 storage on the CPU: whole buffers widened to float32 and rounded back (round
// to nearest even, NaN kept a NaN, overflow to inf), as the GPU's loads and stores do.
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/tensor.h"

namespace ustrain::cpu {

inline float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

inline std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // ties to even
}

// dst[i] = float(src[i]) for n elements of dtype `from` (f32, bf16 or f16), on up to `threads`
// OpenMP threads (0: OpenMP's default team).
void widen(float* dst, const void* src, DType from, std::int64_t n, int threads = 0);
// dst[i] = round(src[i]) into dtype `to` (f32, bf16 or f16), threads as for widen.
void narrow(void* dst, DType to, const float* src, std::int64_t n, int threads = 0);

inline bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

}  // namespace ustrain::cpu
