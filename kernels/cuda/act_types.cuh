// Element conversions and packed vectors shared by the CUDA kernels, for the activation
// dtypes f32, bf16 and f16. Device code only: include from .cu files. Everything here is
// inline, so each translation unit may include it without clashing at link time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ustrain::cuda {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// float -> T, rounding to nearest even.
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// N consecutive elements moved as one aligned access (16 bytes for the packs in use).
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

}  // namespace ustrain::cuda
