// SwiGLU kernels (see swiglu.h): one block per row, 16-byte packs when F allows. Each thread
// reads the gate and up elements it owns before writing them, so dgate_up may alias gate_up.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/swiglu.h"

namespace ustrain::cuda {
namespace {

constexpr int kMaxThreads = 256;
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;  // rows beyond are strided

// Full-precision expf (no fast-math intrinsic): the CPU reference is within 2 ulp of exp.
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// out (N, F), gate_up (N, 2F); N elements per pack, F % N == 0.
template <class T, int N>
__global__ void swiglu_forward_kernel(T* out, const T* gate_up, std::int64_t rows, std::int64_t ffn) {
  const std::int64_t packs = ffn / N;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const auto* gate = reinterpret_cast<const Pack<T, N>*>(gate_up + row * 2 * ffn);
    const auto* up = reinterpret_cast<const Pack<T, N>*>(gate_up + row * 2 * ffn + ffn);
    auto* o = reinterpret_cast<Pack<T, N>*>(out + row * ffn);
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> g = gate[p];
      const Pack<T, N> u = up[p];
      Pack<T, N> y;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float gk = to_float(g.v[k]);
        y.v[k] = from_float<T>(gk * sigmoid(gk) * to_float(u.v[k]));
      }
      o[p] = y;
    }
  }
}

// dgate_up (N, 2F) = [dout * up * silu'(gate) | dout * silu(gate)],
// silu'(g) = sigmoid(g) * (1 + g * (1 - sigmoid(g))).
template <class T, int N>
__global__ void swiglu_backward_kernel(T* dgate_up, const T* dout, const T* gate_up, std::int64_t rows,
                                       std::int64_t ffn) {
  const std::int64_t packs = ffn / N;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const auto* gate = reinterpret_cast<const Pack<T, N>*>(gate_up + row * 2 * ffn);
    const auto* up = reinterpret_cast<const Pack<T, N>*>(gate_up + row * 2 * ffn + ffn);
    const auto* dy = reinterpret_cast<const Pack<T, N>*>(dout + row * ffn);
    auto* dgate = reinterpret_cast<Pack<T, N>*>(dgate_up + row * 2 * ffn);
    auto* dup = reinterpret_cast<Pack<T, N>*>(dgate_up + row * 2 * ffn + ffn);
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> g = gate[p];
      const Pack<T, N> u = up[p];
      const Pack<T, N> d = dy[p];
      Pack<T, N> dg;
      Pack<T, N> du;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float gk = to_float(g.v[k]);
        const float uk = to_float(u.v[k]);
        const float dk = to_float(d.v[k]);
        const float sig = sigmoid(gk);
        dg.v[k] = from_float<T>(dk * uk * sig * (1.0f + gk * (1.0f - sig)));
        du.v[k] = from_float<T>(dk * gk * sig);
      }
      dgate[p] = dg;
      dup[p] = du;
    }
  }
}

std::string describe(const char* op, DType act, std::int64_t rows, std::int64_t ffn) {
  return std::string(op) + ": unsupported dtype " + dtype_name(act) + " or shape gate_up (" + std::to_string(rows) +
         ", 2 * " + std::to_string(ffn) + ")";
}

// One block per row with a multiple of 32 threads covering `packs` packs, at most kMaxThreads.
struct RowLaunch {
  unsigned blocks;
  int threads;
};
RowLaunch row_launch(std::int64_t rows, std::int64_t packs) {
  return {static_cast<unsigned>(std::min(rows, kMaxBlocks)),
          static_cast<int>(std::clamp<std::int64_t>((packs + 31) / 32 * 32, 32, kMaxThreads))};
}

// Checks op's dtype and sizes; then, unless there is nothing to do, calls
// launch(T{}, pack, row_launch(...)) with T the element type of `act` and pack a
// std::integral_constant: 16-byte packs of T when F divides into them and every one of
// `buffers` is 16-byte aligned, else single elements.
template <class Launch>
void launch_rows(const char* op, DType act, std::int64_t rows, std::int64_t ffn,
                 std::initializer_list<const void*> buffers, Launch&& launch) {
  USTRAIN_ASSERT(is_float_type(act) && rows >= 0 && ffn >= 0, describe(op, act, rows, ffn));
  if (rows == 0 || ffn == 0) return;
  const bool aligned = std::all_of(buffers.begin(), buffers.end(), [](const void* p) { return aligned16(p); });
  with_float_type(act, [&](auto tag) {
    constexpr int kPack = 16 / sizeof(tag);
    if (ffn % kPack == 0 && aligned)
      launch(tag, std::integral_constant<int, kPack>{}, row_launch(rows, ffn / kPack));
    else
      launch(tag, std::integral_constant<int, 1>{}, row_launch(rows, ffn));
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void swiglu_forward(void* out, const void* gate_up, std::int64_t rows, std::int64_t ffn, DType act,
                    cudaStream_t stream) {
  launch_rows("swiglu_forward", act, rows, ffn, {out, gate_up}, [&](auto tag, auto pack, RowLaunch l) {
    using T = decltype(tag);
    swiglu_forward_kernel<T, decltype(pack)::value><<<l.blocks, l.threads, 0, stream>>>(
        static_cast<T*>(out), static_cast<const T*>(gate_up), rows, ffn);
  });
}

void swiglu_backward(void* dgate_up, const void* dout, const void* gate_up, std::int64_t rows, std::int64_t ffn,
                     DType act, cudaStream_t stream) {
  launch_rows("swiglu_backward", act, rows, ffn, {dgate_up, dout, gate_up}, [&](auto tag, auto pack, RowLaunch l) {
    using T = decltype(tag);
    swiglu_backward_kernel<T, decltype(pack)::value><<<l.blocks, l.threads, 0, stream>>>(
        static_cast<T*>(dgate_up), static_cast<const T*>(dout), static_cast<const T*>(gate_up), rows, ffn);
  });
}

}  // namespace ustrain::cuda
