// Conversions between float32 and the 16-bit float formats that safetensors files hold.
// Exports round float32 to bfloat16 to nearest, ties to even; imports widen bfloat16,
// float16 and float32 (exactly) to ustrain's float32 master weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ustrain {

std::uint16_t float_to_bf16(float x);  // round to nearest even; NaN stays a (quiet) NaN
float bf16_to_float(std::uint16_t bits);
float f16_to_float(std::uint16_t bits);  // IEEE 754 binary16, subnormals and infinities included

// True for the dtypes convert_to_f32 reads: "F32", "BF16", "F16".
bool converts_to_f32(std::string_view dtype);
// `count` little-endian elements of `dtype` at `src` -> float32 at `dst`.
void convert_to_f32(std::string_view dtype, const void* src, float* dst, std::size_t count);

}  // namespace ustrain
