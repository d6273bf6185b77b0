// RoPE kernel (see rope.h): one block per (b, s) row, one thread per rotated pair; consecutive
// threads take consecutive elements of a head, so the loads coalesce.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/rope.h"

namespace ustrain::cuda {
namespace {

constexpr int kMaxThreads = 256;
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;  // rows beyond are strided

// qkv (rows, width) with rows = B * S; cos, sin (S_max, half). sign = -1 for the inverse.
template <class T>
__global__ void rope_kernel(T* qkv, const float* cos, const float* sin, std::int64_t rows, std::int64_t seq,
                            std::int64_t width, int heads, int half, float sign) {
  const int pairs = heads * half;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::int64_t pos = row % seq;
    const float* c = cos + pos * half;  // (half)
    const float* s = sin + pos * half;  // (half)
    T* r = qkv + row * width;
    for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
      const int h = j / half;
      const int i = j - h * half;
      T* x1 = r + static_cast<std::int64_t>(h) * (2 * half) + i;
      T* x2 = x1 + half;
      const float a = to_float(*x1);
      const float b = to_float(*x2);
      const float ci = c[i];
      const float si = sign * s[i];
      *x1 = from_float<T>(a * ci - b * si);
      *x2 = from_float<T>(b * ci + a * si);
    }
  }
}

}  // namespace

void rope_apply(void* qkv, const float* cos, const float* sin, std::int64_t batch, std::int64_t seq,
                std::int64_t row_width, int rotated_heads, int head_dim, bool inverse, DType act,
                cudaStream_t stream) {
  // Built only when an assertion fails.
  const auto what = [&] {
    return std::string("rope_apply: ") + dtype_name(act) + " qkv (" + std::to_string(batch) + ", " +
           std::to_string(seq) + ", " + std::to_string(row_width) + ") with " + std::to_string(rotated_heads) +
           " heads of " + std::to_string(head_dim);
  };
  USTRAIN_ASSERT(is_float_type(act), what() + ": unsupported dtype");
  USTRAIN_ASSERT(batch >= 0 && seq >= 0 && row_width >= 0, what() + ": negative size");
  USTRAIN_ASSERT(head_dim > 0 && head_dim % 2 == 0, what() + ": head_dim must be even");
  USTRAIN_ASSERT(rotated_heads >= 0 && static_cast<std::int64_t>(rotated_heads) * head_dim <= row_width,
                 what() + ": the rotated heads exceed the row");
  const std::int64_t pairs = static_cast<std::int64_t>(rotated_heads) * (head_dim / 2);
  USTRAIN_ASSERT(pairs <= std::numeric_limits<int>::max(), what() + ": too many rotated elements per row");
  const std::int64_t rows = batch * seq;
  if (rows == 0 || pairs == 0) return;
  const int threads = static_cast<int>(std::min<std::int64_t>((pairs + 31) / 32 * 32, kMaxThreads));
  const auto blocks = static_cast<unsigned>(std::min(rows, kMaxBlocks));
  const float sign = inverse ? -1.0f : 1.0f;
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<T*>(qkv), cos, sin, rows, seq, row_width,
                                                   rotated_heads, head_dim / 2, sign);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ustrain::cuda
