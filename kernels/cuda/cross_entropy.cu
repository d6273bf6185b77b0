// Fused softmax cross-entropy: one block per row. The forward pass keeps a running
// (max, sum of exp) per thread, so the logits are read once and no probability is stored;
// the backward pass recomputes each probability from the saved lse. The vocabulary-parallel
// variant computes the same statistics over one shard's columns, combines the shards' stats
// row by row, and runs the same backward on the shard with the global lse.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cuda_check.h"

namespace ustrain::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// Softmax statistics of a set of logits: their max and sum_v exp(x_v - max).
struct SoftmaxStats {
  float max;
  float sum;
};

// The shift used for exp: the max, or 0 while every logit seen is -inf (avoids -inf - -inf).
__device__ __forceinline__ float shift_of(float max) { return max == -INFINITY ? 0.0f : max; }

__device__ __forceinline__ SoftmaxStats merge(SoftmaxStats a, SoftmaxStats b) {
  const float max = fmaxf(a.max, b.max);
  const float shift = shift_of(max);
  return {max, a.sum * __expf(a.max - shift) + b.sum * __expf(b.max - shift)};
}

// Adds kN logits: rescale the running sum once if the max grows, then add their exps.
template <int kN>
__device__ __forceinline__ void accumulate(SoftmaxStats& st, const float (&x)[kN]) {
  float local_max = x[0];
#pragma unroll
  for (int k = 1; k < kN; ++k) local_max = fmaxf(local_max, x[k]);
  if (local_max > st.max) {
    st.sum *= __expf(st.max - local_max);
    st.max = local_max;
  }
  const float shift = shift_of(st.max);
#pragma unroll
  for (int k = 0; k < kN; ++k) st.sum += __expf(x[k] - shift);
}

// Combines the stats of all threads in a fixed tree; the result is valid in thread 0.
__device__ SoftmaxStats block_merge(SoftmaxStats st) {
  __shared__ SoftmaxStats warp_stats[kWarps];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    st = merge(st, {__shfl_xor_sync(0xffffffffu, st.max, offset), __shfl_xor_sync(0xffffffffu, st.sum, offset)});
  if (lane == 0) warp_stats[warp] = st;
  __syncthreads();
  if (warp == 0) {
    st = lane < kWarps ? warp_stats[lane] : SoftmaxStats{-INFINITY, 0.0f};
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      st = merge(st, {__shfl_xor_sync(0xffffffffu, st.max, offset), __shfl_xor_sync(0xffffffffu, st.sum, offset)});
  }
  return st;
}

// The stats of z[0, count), one row read by the whole block in kVec-element packs (kVec > 1
// needs z 16-byte aligned) and a scalar tail. Valid in thread 0.
template <class T, int kVec>
__device__ __forceinline__ SoftmaxStats row_stats(const T* z, std::int64_t count) {
  SoftmaxStats st{-INFINITY, 0.0f};
  const std::int64_t packs = count / kVec;
  for (std::int64_t p = threadIdx.x; p < packs; p += kThreads) {
    const Pack<T, kVec> pack = reinterpret_cast<const Pack<T, kVec>*>(z)[p];
    float x[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] = to_float(pack.v[k]);
    accumulate(st, x);
  }
  for (std::int64_t v = packs * kVec + threadIdx.x; v < count; v += kThreads) {
    const float x[1] = {to_float(z[v])};
    accumulate(st, x);
  }
  return block_merge(st);
}

// log sum exp of the stats, in double like the CPU op.
__device__ __forceinline__ double lse_of(SoftmaxStats st) {
  return static_cast<double>(st.max) + log(static_cast<double>(st.sum));
}

// Grid: one block per row. kVec > 1 needs every row 16-byte aligned (checked by the launcher).
template <class T, int kVec>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(float* losses, float* lse, const T* logits, const std::int32_t* targets, std::int64_t vocab) {
  const std::int64_t row = blockIdx.x;
  const std::int32_t target = targets[row];
  if (target < 0 || target >= vocab) {  // whole block leaves together
    if (threadIdx.x == 0) {
      const float value = target < 0 ? 0.0f : __int_as_float(0x7fc00000);  // NaN marks a bad target
      losses[row] = value;
      lse[row] = value;
    }
    return;
  }
  const T* z = logits + row * vocab;  // (V)
  const SoftmaxStats st = row_stats<T, kVec>(z, vocab);
  if (threadIdx.x == 0) {
    // Like the CPU op: lse in double, then loss = lse - logit[target].
    const double row_lse = lse_of(st);
    lse[row] = static_cast<float>(row_lse);
    losses[row] = static_cast<float>(row_lse - static_cast<double>(to_float(z[target])));
  }
}

// Grid: one block per row of a shard: stats (2, N) = [lse over the valid columns, the
// target's logit if it lies in the shard]. kVec > 1 needs 16-byte aligned rows.
template <class T, int kVec>
__global__ void __launch_bounds__(kThreads)
    shard_stats_kernel(float* stats, const T* logits, const std::int32_t* targets, std::int64_t rows,
                       std::int64_t width, std::int64_t begin, std::int64_t valid) {
  const std::int64_t row = blockIdx.x;
  const std::int32_t target = targets[row];
  float* lse = stats;                // row 0 of (2, N)
  float* target_logit = stats + rows;  // row 1
  if (target < 0 || valid == 0) {    // whole block leaves together
    if (threadIdx.x == 0) {
      lse[row] = target < 0 ? 0.0f : -INFINITY;
      target_logit[row] = 0.0f;
    }
    return;
  }
  const T* z = logits + row * width;  // (Vs)
  const SoftmaxStats st = row_stats<T, kVec>(z, valid);
  if (threadIdx.x == 0) {
    lse[row] = static_cast<float>(lse_of(st));
    const std::int64_t local = static_cast<std::int64_t>(target) - begin;
    target_logit[row] = local >= 0 && local < valid ? to_float(z[local]) : 0.0f;
  }
}

// One thread per row: parts (P, 2, N) -> the global lse and the loss, in double like the CPU.
__global__ void combine_kernel(float* losses, float* lse, const float* parts, const std::int32_t* targets,
                               std::int64_t rows, std::int64_t shards) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  if (targets[row] < 0) {
    losses[row] = lse[row] = 0.0f;
    return;
  }
  double m = -INFINITY, target_logit = 0;
  for (std::int64_t s = 0; s < shards; ++s) {
    m = fmax(m, static_cast<double>(parts[(2 * s) * rows + row]));
    target_logit += parts[(2 * s + 1) * rows + row];
  }
  double sum = 0;
  for (std::int64_t s = 0; s < shards; ++s) sum += exp(static_cast<double>(parts[(2 * s) * rows + row]) - m);
  const double row_lse = m + log(sum);
  lse[row] = static_cast<float>(row_lse);
  losses[row] = static_cast<float>(row_lse - target_logit);
}

__device__ __forceinline__ float gradient(float logit, float row_lse, float dloss, bool is_target) {
  const float g = __expf(logit - row_lse) * dloss;
  return is_target ? g - dloss : g;
}

// Grid: one block per row. dlogits may alias logits: each thread reads an element, then
// writes that same element, and no other thread touches it. The row holds `width` columns
// of which the first `valid` are the vocabulary ids [begin, begin + valid); the rest are
// padding (zero gradient). Whole rows: begin 0, valid = width, and a target past the
// vocabulary marks the row NaN; a shard's row: the target may lie in another shard.
template <class T, int kVec>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(T* dlogits, const T* logits, const float* lse, const std::int32_t* targets, std::int64_t width,
                    std::int64_t begin, std::int64_t valid, bool sharded, float dloss) {
  const std::int64_t row = blockIdx.x;
  const std::int32_t target = targets[row];
  T* d = dlogits + row * width;       // (V)
  const T* z = logits + row * width;  // (V)
  if (target < 0 || (!sharded && target >= width)) {
    const T value = from_float<T>(target < 0 ? 0.0f : __int_as_float(0x7fc00000));
    for (std::int64_t v = threadIdx.x; v < width; v += kThreads) d[v] = value;
    return;
  }
  const std::int64_t local_target = static_cast<std::int64_t>(target) - begin;  // may lie outside the row
  const float row_lse = lse[row];
  const auto grad_at = [&](std::int64_t v, float logit) {
    return v < valid ? gradient(logit, row_lse, dloss, v == local_target) : 0.0f;
  };
  const std::int64_t packs = width / kVec;
  for (std::int64_t p = threadIdx.x; p < packs; p += kThreads) {
    const Pack<T, kVec> in = reinterpret_cast<const Pack<T, kVec>*>(z)[p];
    Pack<T, kVec> out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) out.v[k] = from_float<T>(grad_at(p * kVec + k, to_float(in.v[k])));
    reinterpret_cast<Pack<T, kVec>*>(d)[p] = out;
  }
  for (std::int64_t v = packs * kVec + threadIdx.x; v < width; v += kThreads)
    d[v] = from_float<T>(grad_at(v, to_float(z[v])));
}

// 16-byte loads need every row to start on a 16-byte boundary.
template <class T>
bool rows_vectorisable(std::int64_t vocab, const void* a, const void* b) {
  return aligned16(a) && aligned16(b) && (vocab * static_cast<std::int64_t>(sizeof(T))) % 16 == 0;
}

std::string shape_text(const char* op, DType act, std::int64_t rows, std::int64_t vocab) {
  return std::string(op) + ": logits (" + std::to_string(rows) + ", " + std::to_string(vocab) + ") in " +
         dtype_name(act);
}

void check_shape(const char* op, DType act, std::int64_t rows, std::int64_t vocab) {
  USTRAIN_ASSERT(rows >= 0 && vocab > 0, shape_text(op, act, rows, vocab) + ": empty vocabulary or negative rows");
  USTRAIN_ASSERT(rows <= 0x7fffffff, shape_text(op, act, rows, vocab) + ": more rows than one grid holds");
}

// Calls launch(std::integral_constant<int, kVec>{}) to launch a row kernel: kVec = 16 / sizeof(T)
// (16-byte packs) when rows of `width` elements at a and b all start 16-byte aligned, else 1.
template <class T, class Launch>
void with_pack_width(std::int64_t width, const void* a, const void* b, Launch&& launch) {
  if (rows_vectorisable<T>(width, a, b))
    launch(std::integral_constant<int, 16 / sizeof(T)>{});
  else
    launch(std::integral_constant<int, 1>{});
  USTRAIN_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_forward(float* losses, float* lse, const void* logits, const std::int32_t* targets, std::int64_t rows,
                    std::int64_t vocab, cudaStream_t stream) {
  const T* z = static_cast<const T*>(logits);
  with_pack_width<T>(vocab, logits, logits, [&](auto pack) {
    forward_kernel<T, decltype(pack)::value>
        <<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(losses, lse, z, targets, vocab);
  });
}

template <class T>
void launch_shard_stats(float* stats, const void* logits, const std::int32_t* targets, std::int64_t rows,
                        std::int64_t width, std::int64_t begin, std::int64_t valid, cudaStream_t stream) {
  const T* z = static_cast<const T*>(logits);
  with_pack_width<T>(width, logits, logits, [&](auto pack) {
    shard_stats_kernel<T, decltype(pack)::value>
        <<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(stats, z, targets, rows, width, begin, valid);
  });
}

template <class T>
void launch_backward(void* dlogits, const void* logits, const float* lse, const std::int32_t* targets,
                     std::int64_t rows, std::int64_t width, std::int64_t begin, std::int64_t valid, bool sharded,
                     float dloss, cudaStream_t stream) {
  T* d = static_cast<T*>(dlogits);
  const T* z = static_cast<const T*>(logits);
  with_pack_width<T>(width, dlogits, logits, [&](auto pack) {
    backward_kernel<T, decltype(pack)::value><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        d, z, lse, targets, width, begin, valid, sharded, dloss);
  });
}

// Calls launch(T{}) for the activation dtype.
template <class Launch>
void with_act(const char* op, DType act, std::int64_t rows, std::int64_t width, Launch&& launch) {
  with_float_type(act, launch, [&] { return shape_text(op, act, rows, width) + ": unsupported dtype"; });
}

}  // namespace

void cross_entropy_forward(float* losses, float* lse, const void* logits, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t vocab, DType act, cudaStream_t stream) {
  check_shape("cross_entropy_forward", act, rows, vocab);
  if (rows == 0) return;
  with_act("cross_entropy_forward", act, rows, vocab, [&](auto tag) {
    launch_forward<decltype(tag)>(losses, lse, logits, targets, rows, vocab, stream);
  });
}

void cross_entropy_backward(void* dlogits, const void* logits, const float* lse, const std::int32_t* targets,
                            std::int64_t rows, std::int64_t vocab, float dloss, DType act, cudaStream_t stream) {
  check_shape("cross_entropy_backward", act, rows, vocab);
  if (rows == 0) return;
  with_act("cross_entropy_backward", act, rows, vocab, [&](auto tag) {
    launch_backward<decltype(tag)>(dlogits, logits, lse, targets, rows, vocab, 0, vocab, false, dloss, stream);
  });
}

void cross_entropy_shard_stats(float* stats, const void* logits, const std::int32_t* targets, std::int64_t rows,
                               std::int64_t width, std::int64_t begin, std::int64_t valid, DType act,
                               cudaStream_t stream) {
  check_shape("cross_entropy_shard_stats", act, rows, width);
  USTRAIN_ASSERT(begin >= 0 && valid >= 0 && valid <= width,
                 shape_text("cross_entropy_shard_stats", act, rows, width) + ": bad shard");
  if (rows == 0) return;
  with_act("cross_entropy_shard_stats", act, rows, width, [&](auto tag) {
    launch_shard_stats<decltype(tag)>(stats, logits, targets, rows, width, begin, valid, stream);
  });
}

void cross_entropy_combine(float* losses, float* lse, const float* parts, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t shards, cudaStream_t stream) {
  USTRAIN_ASSERT(rows >= 0 && shards >= 1, "cross_entropy_combine: " + std::to_string(rows) + " rows of " +
                                               std::to_string(shards) + " shards");
  if (rows == 0) return;
  constexpr int kRowThreads = 256;
  combine_kernel<<<static_cast<unsigned>((rows + kRowThreads - 1) / kRowThreads), kRowThreads, 0, stream>>>(
      losses, lse, parts, targets, rows, shards);
  USTRAIN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward_shard(void* dlogits, const void* logits, const float* lse, const std::int32_t* targets,
                                  std::int64_t rows, std::int64_t width, std::int64_t begin, std::int64_t valid,
                                  float dloss, DType act, cudaStream_t stream) {
  check_shape("cross_entropy_backward_shard", act, rows, width);
  USTRAIN_ASSERT(begin >= 0 && valid >= 0 && valid <= width,
                 shape_text("cross_entropy_backward_shard", act, rows, width) + ": bad shard");
  if (rows == 0) return;
  with_act("cross_entropy_backward_shard", act, rows, width, [&](auto tag) {
    launch_backward<decltype(tag)>(dlogits, logits, lse, targets, rows, width, begin, valid, true, dloss, stream);
  });
}

}  // namespace ustrain::cuda
