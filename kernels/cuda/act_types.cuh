// The activation dtypes of the CUDA kernels, f32, bf16 and f16: the one dispatch from a DType
// to a kernel's element type, element conversions and packed vectors. Include from .cu files
// only (device code). Everything here is inline, so each translation unit may include it
// without clashing at link time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "kernels/error.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

// ---- host: from a DType to an element type ----

// Whether the kernels have an instantiation for `t`.
inline bool is_float_type(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// Calls launch(T{}) with the element type T of `t` (float, __nv_bfloat16 or __half). Any other
// dtype is an internal error (the ops check their arguments first), reported as unsupported().
template <class Launch, class Unsupported>
void with_float_type(DType t, Launch&& launch, Unsupported&& unsupported) {
  switch (t) {
    case DType::f32: return launch(float{});
    case DType::bf16: return launch(__nv_bfloat16{});
    case DType::f16: return launch(__half{});
    default: USTRAIN_ASSERT(false, unsupported());
  }
}
template <class Launch>
void with_float_type(DType t, Launch&& launch) {
  with_float_type(t, launch, [t] { return std::string("not a float dtype: ") + dtype_name(t); });
}

// 16-byte accesses (a Pack of 16 bytes) need 16-byte aligned addresses.
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// ---- device: conversions and packs ----

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
