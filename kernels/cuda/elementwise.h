// Element-wise CUDA ops: residual add, scaling, fill and dtype conversion.
//
// All are grid-stride loops with 64-bit indices (n may exceed 2^32), moving 16 bytes per
// access when every pointer is 16-byte aligned, with a scalar tail. Math is in fp32; results
// are rounded to the storage type to nearest even. Asynchronous on `stream`; n == 0 is a no-op.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// out (n) = a + b, all three in `act` (f32, bf16 or f16). out may alias a or b.
void add(void* out, const void* a, const void* b, std::int64_t n, DType act, cudaStream_t stream);

// x (n) *= factor, in place; dtype f32, bf16 or f16.
void scale(void* x, float factor, std::int64_t n, DType dtype, cudaStream_t stream);

// dst (n) = value. f32, bf16 and f16 round the value; the integer dtypes (i32, u16, u32)
// require it to be exactly representable, as the CPU backend does.
void fill(void* dst, float value, std::int64_t n, DType dtype, cudaStream_t stream);

// dst (n) = src (n) converted between f32, bf16 and f16 (round to nearest even). The same
// dtype on both sides is a plain copy. dst and src must not overlap unless they are equal.
void convert(void* dst, DType dst_type, const void* src, DType src_type, std::int64_t n, cudaStream_t stream);

}  // namespace ustrain::cuda
