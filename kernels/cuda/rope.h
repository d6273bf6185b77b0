// Rotary position embedding on CUDA, rotate-half layout (Hugging Face Llama), as
// kernels/cpu/cpu_rope.cpp: within each head, element i pairs with element i + Dh/2 and
//   x1' = x1 * cos - x2 * sin,   x2' = x2 * cos + x1 * sin
// with the angle of the row's position (sin negated for the inverse). Math in fp32.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// In place on the first `rotated_heads` heads (each head_dim wide) of every (b, s) row of
// qkv (B, S, W) in `act` (f32, bf16 or f16); the rest of each row is left alone. cos and sin
// are fp32 tables (S_max, head_dim / 2), row s for position s; the caller guarantees
// S_max >= seq. inverse = the backward: the rotation by the opposite angle.
void rope_apply(void* qkv, const float* cos, const float* sin, std::int64_t batch, std::int64_t seq,
                std::int64_t row_width, int rotated_heads, int head_dim, bool inverse, DType act,
                cudaStream_t stream);

}  // namespace ustrain::cuda
