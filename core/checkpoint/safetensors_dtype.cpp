#include "core/checkpoint/safetensors_dtype.h"

#include <bit>
#include <cstring>

#include "kernels/error.h"

namespace ustrain {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

std::uint16_t float_to_bf16(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // keep NaN a NaN after truncation
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to the even neighbour.
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: shift the mantissa up until its leading one becomes the implicit bit.
  std::uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mantissa & 0x3FFu) << 13));
}

bool converts_to_f32(std::string_view dtype) { return dtype == "F32" || dtype == "BF16" || dtype == "F16"; }

void convert_to_f32(std::string_view dtype, const void* src, float* dst, std::size_t count) {
  if (dtype == "F32") {
    std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  USTRAIN_ASSERT(dtype == "BF16" || dtype == "F16", "no float32 conversion from " + std::string(dtype));
  const auto* in = static_cast<const unsigned char*>(src);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    dst[i] = dtype == "BF16" ? bf16_to_float(bits) : f16_to_float(bits);
  }
}

}  // namespace ustrain
