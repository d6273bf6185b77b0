// Element-wise kernels (see elementwise.h): one grid-stride loop over 16-byte packs when the
// pointers allow, then a scalar loop over the remainder.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"

namespace ustrain::cuda {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; the loops stride past the rest.
constexpr std::int64_t kMaxBlocks = 4096;

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// `work` items, one per thread, strided past kMaxBlocks * kThreads.
unsigned blocks_for(std::int64_t work) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

__device__ __forceinline__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Scale {
  float factor;
  __device__ float operator()(float x) const { return x * factor; }
};
struct Identity {
  __device__ float operator()(float x) const { return x; }
};

// out[i] = op(in[i]); out may equal in (each element is read before it is written, by the
// same thread). `packed`: both pointers are aligned to their N-element packs.
template <class Out, class In, int N, class Op>
__global__ void map1_kernel(Out* out, const In* in, std::int64_t n, bool packed, Op op) {
  const std::int64_t stride = grid_stride();
  std::int64_t tail = 0;
  if (packed) {
    const std::int64_t packs = n / N;
    auto* out_packs = reinterpret_cast<Pack<Out, N>*>(out);
    const auto* in_packs = reinterpret_cast<const Pack<In, N>*>(in);
    for (std::int64_t p = first_index(); p < packs; p += stride) {
      const Pack<In, N> x = in_packs[p];
      Pack<Out, N> y;
#pragma unroll
      for (int k = 0; k < N; ++k) y.v[k] = from_float<Out>(op(to_float(x.v[k])));
      out_packs[p] = y;
    }
    tail = packs * N;
  }
  for (std::int64_t i = tail + first_index(); i < n; i += stride) out[i] = from_float<Out>(op(to_float(in[i])));
}

// out[i] = op(a[i], b[i]); out may equal a or b.
template <class T, int N, class Op>
__global__ void map2_kernel(T* out, const T* a, const T* b, std::int64_t n, bool packed, Op op) {
  const std::int64_t stride = grid_stride();
  std::int64_t tail = 0;
  if (packed) {
    const std::int64_t packs = n / N;
    auto* out_packs = reinterpret_cast<Pack<T, N>*>(out);
    const auto* a_packs = reinterpret_cast<const Pack<T, N>*>(a);
    const auto* b_packs = reinterpret_cast<const Pack<T, N>*>(b);
    for (std::int64_t p = first_index(); p < packs; p += stride) {
      const Pack<T, N> x = a_packs[p];
      const Pack<T, N> y = b_packs[p];
      Pack<T, N> z;
#pragma unroll
      for (int k = 0; k < N; ++k) z.v[k] = from_float<T>(op(to_float(x.v[k]), to_float(y.v[k])));
      out_packs[p] = z;
    }
    tail = packs * N;
  }
  for (std::int64_t i = tail + first_index(); i < n; i += stride)
    out[i] = from_float<T>(op(to_float(a[i]), to_float(b[i])));
}

// dst[i] = bits, for 2- and 4-byte element types.
template <class U>
__global__ void fill_kernel(U* dst, U bits, std::int64_t n, bool packed) {
  constexpr int N = 16 / sizeof(U);
  const std::int64_t stride = grid_stride();
  std::int64_t tail = 0;
  if (packed) {
    const std::int64_t packs = n / N;
    Pack<U, N> value;
#pragma unroll
    for (int k = 0; k < N; ++k) value.v[k] = bits;
    auto* dst_packs = reinterpret_cast<Pack<U, N>*>(dst);
    for (std::int64_t p = first_index(); p < packs; p += stride) dst_packs[p] = value;
    tail = packs * N;
  }
  for (std::int64_t i = tail + first_index(); i < n; i += stride) dst[i] = bits;
}

template <class Out, class In, class Op>
void launch_map1(Out* out, const In* in, std::int64_t n, Op op, cudaStream_t stream) {
  constexpr int N = 16 / (sizeof(Out) > sizeof(In) ? sizeof(Out) : sizeof(In));
  const bool packed = aligned(out, sizeof(Pack<Out, N>)) && aligned(in, sizeof(Pack<In, N>));
  const std::int64_t work = packed ? std::max<std::int64_t>(n / N, 1) : n;
  map1_kernel<Out, In, N><<<blocks_for(work), kThreads, 0, stream>>>(out, in, n, packed, op);
  USTRAIN_CUDA_CHECK_LAUNCH();
}

template <class Bits>
Bits bits_of(const void* value) {
  Bits b;
  std::memcpy(&b, value, sizeof b);
  return b;
}

// The value as an Int, refusing anything the integer type cannot hold exactly.
template <class Int>
Int exact_integer(float value, DType t) {
  const double v = value;
  USTRAIN_ASSERT(std::floor(v) == v && v >= static_cast<double>(std::numeric_limits<Int>::min()) &&
                     v <= static_cast<double>(std::numeric_limits<Int>::max()),
                 "fill: value " + std::to_string(value) + " is not representable as " + dtype_name(t));
  return static_cast<Int>(value);
}

template <class U>
void launch_fill(void* dst, U bits, std::int64_t n, cudaStream_t stream) {
  std::uint8_t bytes[sizeof(U)];
  std::memcpy(bytes, &bits, sizeof bits);
  if (std::all_of(bytes, bytes + sizeof(U), [&](std::uint8_t b) { return b == bytes[0]; })) {
    USTRAIN_CUDA_CHECK(cudaMemsetAsync(dst, bytes[0], static_cast<std::size_t>(n) * sizeof(U), stream));
    return;
  }
  constexpr int N = 16 / sizeof(U);
  const bool packed = aligned(dst, 16);
  const std::int64_t work = packed ? std::max<std::int64_t>(n / N, 1) : n;
  fill_kernel<U><<<blocks_for(work), kThreads, 0, stream>>>(static_cast<U*>(dst), bits, n, packed);
  USTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void add(void* out, const void* a, const void* b, std::int64_t n, DType act, cudaStream_t stream) {
  USTRAIN_ASSERT(is_float_type(act) && n >= 0,
                 std::string("add: unsupported dtype ") + dtype_name(act) + " for n = " + std::to_string(n));
  if (n == 0) return;
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = 16 / sizeof(T);
    const bool packed = aligned(out, 16) && aligned(a, 16) && aligned(b, 16);
    const std::int64_t work = packed ? std::max<std::int64_t>(n / N, 1) : n;
    map2_kernel<T, N><<<blocks_for(work), kThreads, 0, stream>>>(
        static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n, packed, Add{});
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

void scale(void* x, float factor, std::int64_t n, DType dtype, cudaStream_t stream) {
  USTRAIN_ASSERT(is_float_type(dtype) && n >= 0,
                 std::string("scale: unsupported dtype ") + dtype_name(dtype) + " for n = " + std::to_string(n));
  if (n == 0) return;
  with_float_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_map1(static_cast<T*>(x), static_cast<const T*>(x), n, Scale{factor}, stream);
  });
}

void fill(void* dst, float value, std::int64_t n, DType dtype, cudaStream_t stream) {
  USTRAIN_ASSERT(n >= 0, "fill: negative count " + std::to_string(n));
  if (n == 0) return;
  switch (dtype) {
    case DType::f32:
      launch_fill(dst, bits_of<std::uint32_t>(&value), n, stream);
      return;
    case DType::bf16: {
      const __nv_bfloat16 rounded = __float2bfloat16_rn(value);
      launch_fill(dst, bits_of<std::uint16_t>(&rounded), n, stream);
      return;
    }
    case DType::f16: {
      const __half rounded = __float2half_rn(value);
      launch_fill(dst, bits_of<std::uint16_t>(&rounded), n, stream);
      return;
    }
    case DType::i32: {
      const std::int32_t v = exact_integer<std::int32_t>(value, dtype);
      launch_fill(dst, bits_of<std::uint32_t>(&v), n, stream);
      return;
    }
    case DType::u16:
      launch_fill(dst, exact_integer<std::uint16_t>(value, dtype), n, stream);
      return;
    case DType::u32:
      launch_fill(dst, exact_integer<std::uint32_t>(value, dtype), n, stream);
      return;
    case DType::f64:  // host scalars only; no device buffer holds f64
      break;
  }
  USTRAIN_ASSERT(false, std::string("fill: unsupported dtype ") + dtype_name(dtype) + " for n = " + std::to_string(n));
}

void convert(void* dst, DType dst_type, const void* src, DType src_type, std::int64_t n, cudaStream_t stream) {
  USTRAIN_ASSERT(is_float_type(dst_type) && is_float_type(src_type) && n >= 0,
                 std::string("convert: unsupported dtypes ") + dtype_name(src_type) + " -> " + dtype_name(dst_type) +
                     " for n = " + std::to_string(n));
  if (n == 0) return;
  if (dst_type == src_type) {
    if (dst != src)
      USTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * dtype_size(dst_type),
                                         cudaMemcpyDeviceToDevice, stream));
    return;
  }
  with_float_type(dst_type, [&](auto out_tag) {
    using Out = decltype(out_tag);
    with_float_type(src_type, [&](auto in_tag) {
      using In = decltype(in_tag);
      // Equal types were copied above; skip instantiating kernels that never run.
      if constexpr (!std::is_same_v<Out, In>)
        launch_map1(static_cast<Out*>(dst), static_cast<const In*>(src), n, Identity{}, stream);
    });
  });
}

}  // namespace ustrain::cuda
