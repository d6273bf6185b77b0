// bfloat16 on the host: conversions and the element-wise kernels the MPI backend reduces
// with. MPI has no bf16 type, so a bf16 sum adds in f32 and rounds each partial sum back to
// bf16 (round to nearest even), exactly as a bf16 reduction on the GPU does.
#pragma once

#include <cstdint>

#include "kernels/cpu/half_convert.h"

namespace ustrain::bf16 {

inline float to_float(std::uint16_t bits) { return cpu::bf16_to_float(bits); }
inline std::uint16_t from_float(float x) { return cpu::float_to_bf16(x); }

// inout[i] = bf16(in[i] + inout[i])
void sum_into(const std::uint16_t* in, std::uint16_t* inout, std::int64_t n);
// data[i] = bf16(data[i] / divisor)
void divide(std::uint16_t* data, std::int64_t n, float divisor);

}  // namespace ustrain::bf16

// The same for fp16, which MPI has no type for either: sums in f32, each rounded back to fp16.
namespace ustrain::f16 {

void sum_into(const _Float16* in, _Float16* inout, std::int64_t n);
void divide(_Float16* data, std::int64_t n, float divisor);

}  // namespace ustrain::f16
