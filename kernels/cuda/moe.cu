// Mixture-of-experts kernels (see moe.h).
// Routing, forward and backward: one warp per token row, the row's sums in double like the CPU
// op (the router's rows are short; this keeps the probs, and so the experts chosen, those of
// the CPU). Top-k: k passes of a warp arg-max, pass j taking the best expert that ranks after
// pick j - 1 in the order (key descending, then expert ascending; the key is the prob, plus
// the expert's bias where balancing adds one). The order is strict, so
// the picks are distinct, a tie goes to the lower expert, and nothing is kept between passes:
// any E and any k <= E.
// Combine: one block per token, threads over D. Its backward: one warp per (token, pick) row.
// Every sum runs in a fixed order and no kernel uses atomics, so results repeat bit for bit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe.h"

namespace ustrain::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowWarps = 4;      // token rows per block of the routing kernels
constexpr int kPairWarps = 8;     // (token, pick) rows per block of the combine backward
constexpr int kMaxThreads = 256;  // threads per block of the combine forward
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;  // rows beyond are strided

// ---- warp reductions: xor butterflies, so every lane ends with the same bits ----

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  return x;
}

template <class V>
__device__ __forceinline__ V warp_sum(V x) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

// ---- top-k ----

// An expert, its selection key and its prob: a NaN key ranks below every real one.
struct Ranked {
  float key;
  float prob;
  int expert;  // < 0: none
};

__device__ __forceinline__ float rank_key(float key) { return isnan(key) ? -INFINITY : key; }

// The ranking order: the higher key first, equal keys in expert order.
__device__ __forceinline__ bool ranks_before(Ranked a, Ranked b) {
  return a.key > b.key || (a.key == b.key && a.expert < b.expert);
}

// The better of two candidates; commutative, so the butterfly gives every lane the same pick.
__device__ __forceinline__ Ranked better(Ranked a, Ranked b) {
  if (b.expert < 0) return a;
  if (a.expert < 0) return b;
  return ranks_before(b, a) ? b : a;
}

// The first expert of p (E) that ranks after `prev` (in every lane), by p + bias (bias (E) or
// null). Lane l reads p[e] for e = l mod 32 only: the probs it wrote itself.
__device__ __forceinline__ Ranked next_pick(const float* p, const float* bias, std::int64_t E, Ranked prev,
                                            int lane) {
  Ranked best{0.0f, 0.0f, -1};
  for (std::int64_t e = lane; e < E; e += kWarp) {
    const float key = bias != nullptr ? p[e] + bias[e] : p[e];
    const Ranked c{rank_key(key), p[e], static_cast<int>(e)};
    if (ranks_before(prev, c)) best = better(best, c);
  }
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    best = better(best, {__shfl_xor_sync(kFullMask, best.key, offset), __shfl_xor_sync(kFullMask, best.prob, offset),
                         __shfl_xor_sync(kFullMask, best.expert, offset)});
  return best;
}

// ---- routing ----

// Grid: kRowWarps token rows per block, strided. logits and probs (N, E); experts and gates
// (N, k); lse (N); bias (E) or null.
template <class T>
__global__ void __launch_bounds__(kRowWarps* kWarp)
    route_kernel(std::int32_t* experts, float* gates, float* probs, float* lse, const T* logits, const float* bias,
                 std::int64_t rows, std::int64_t E, std::int64_t k, bool sigmoid, bool renormalize) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kRowWarps;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / kWarp; t < rows;
       t += stride) {
    const T* x = logits + t * E;  // (E)
    float* p = probs + t * E;     // (E)
    float m = -INFINITY;
    for (std::int64_t e = lane; e < E; e += kWarp) m = fmaxf(m, to_float(x[e]));
    m = warp_max(m);
    double sum = 0.0;
    for (std::int64_t e = lane; e < E; e += kWarp) sum += exp(static_cast<double>(to_float(x[e])) - m);
    sum = warp_sum(sum);
    if (lane == 0) lse[t] = static_cast<float>(m + log(sum));
    for (std::int64_t e = lane; e < E; e += kWarp) {
      const double xe = to_float(x[e]);
      p[e] = sigmoid ? static_cast<float>(1.0 / (1.0 + exp(-xe))) : static_cast<float>(exp(xe - m) / sum);
    }
    // Pick j goes out through lane j mod 32, which alone later rescales it.
    std::int32_t* chosen = experts + t * k;  // (k)
    float* g = gates + t * k;                // (k)
    Ranked prev{INFINITY, 0.0f, -1};         // ranks before every key
    double chosen_sum = 0.0;
    for (std::int64_t j = 0; j < k; ++j) {
      prev = next_pick(p, bias, E, prev, lane);
      const float prob = prev.expert < 0 ? NAN : prev.prob;
      chosen_sum += prob;
      if (j % kWarp == lane) {
        chosen[j] = prev.expert;
        g[j] = prob;
      }
    }
    if (renormalize)
      for (std::int64_t j = lane; j < k; j += kWarp) g[j] = static_cast<float>(g[j] / chosen_sum);
  }
}

// Grid: as route_kernel. dlogits and logits (N, E) in T; the rest fp32 (experts i32);
// seq_grad (N / seq_len, E) or null. dp, the gradient of the chosen probs plus the sequence's
// share, then through the score function; the arithmetic and its roundings are those of the
// CPU op.
template <class T>
__global__ void __launch_bounds__(kRowWarps* kWarp)
    route_backward_kernel(T* dlogits, const float* dgates, const T* logits, const float* probs, const float* lse,
                          const std::int32_t* experts, const float* gates, const float* seq_grad,
                          std::int64_t seq_len, std::int64_t rows, std::int64_t E, std::int64_t k, bool sigmoid,
                          bool renormalize, float z_grad) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kRowWarps;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * kRowWarps + threadIdx.x / kWarp; t < rows;
       t += stride) {
    const float* p = probs + t * E;                // (E)
    const T* x = logits + t * E;                   // (E)
    const float* g = gates + t * k;                // (k)
    const float* dg = dgates + t * k;              // (k)
    const std::int32_t* chosen = experts + t * k;  // (k)
    // The prob of pick j; an expert id outside [0, E) (not from moe_route) gives NaN.
    const auto chosen_prob = [&](std::int64_t j) { return chosen[j] >= 0 && chosen[j] < E ? p[chosen[j]] : NAN; };
    // With renormalisation g_j = p_j / S: dp_j = (dg_j - sum_m dg_m g_m) / S.
    double scale = 1.0, shift = 0.0;
    if (renormalize) {
      double sum = 0.0, dot = 0.0;
      for (std::int64_t j = lane; j < k; j += kWarp) {
        sum += chosen_prob(j);
        dot += static_cast<double>(dg[j]) * g[j];
      }
      scale = 1.0 / warp_sum(sum);
      shift = warp_sum(dot);
    }
    const auto dp_of_pick = [&](std::int64_t j) { return static_cast<float>((dg[j] - shift) * scale); };
    // The sequence's gradient c (E) of the normalised scores p_e / P: sigmoid scores add
    // (c_e - sum_m c_m p_m / P) / P to dp_e (P = sum_m p_m), softmax scores c_e.
    const float* c = seq_grad != nullptr ? seq_grad + (t / seq_len) * E : nullptr;
    double total = 1.0, mean = 0.0;
    if (c != nullptr && sigmoid) {
      double sum = 0.0, dot = 0.0;
      for (std::int64_t e = lane; e < E; e += kWarp) {
        sum += p[e];
        dot += static_cast<double>(c[e]) * p[e];
      }
      total = warp_sum(sum);
      mean = warp_sum(dot) / total;
    }
    const auto dp_of = [&](std::int64_t e) {
      float dp = 0.0f;
      for (std::int64_t j = 0; j < k; ++j)
        if (chosen[j] == e) dp = dp_of_pick(j);
      if (c != nullptr) dp = static_cast<float>(dp + (c[e] - mean) / total);
      return dp;
    };
    // Softmax: dl_e = p_e (dp_e - sum_m dp_m p_m); without a sequence gradient only the
    // chosen experts have dp != 0.
    double dot = 0.0;
    if (!sigmoid) {
      if (c != nullptr) {
        for (std::int64_t e = lane; e < E; e += kWarp) dot += static_cast<double>(dp_of(e)) * p[e];
      } else {
        for (std::int64_t j = lane; j < k; j += kWarp) dot += static_cast<double>(dp_of_pick(j)) * chosen_prob(j);
      }
      dot = warp_sum(dot);
    }
    const double row_lse = lse[t];
    for (std::int64_t e = lane; e < E; e += kWarp) {
      const float dp = dp_of(e);
      const double pe = p[e];
      float dl = sigmoid ? static_cast<float>(dp * pe * (1.0 - pe)) : static_cast<float>(pe * (dp - dot));
      if (z_grad != 0.0f)  // d(z lse^2) / dlogit_e = 2 z lse softmax_e
        dl += static_cast<float>(2.0 * z_grad * row_lse * exp(static_cast<double>(to_float(x[e])) - row_lse));
      dlogits[t * E + e] = from_float<T>(dl);
    }
  }
}

// ---- combine ----

// Grid: one block per token, strided. out (N, D), rows (N k, D), gates (N, k); kVec elements
// per pack, D % kVec == 0. The picks are added in order, each by one fused multiply-add.
template <class T, int kVec>
__global__ void combine_kernel(T* out, const T* rows, const float* gates, std::int64_t tokens, std::int64_t k,
                               std::int64_t dim) {
  using P = Pack<T, kVec>;
  const std::int64_t packs = dim / kVec;
  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float* g = gates + t * k;  // (k)
    P* o = reinterpret_cast<P*>(out + t * dim);
    for (std::int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      float acc[kVec] = {};
      for (std::int64_t j = 0; j < k; ++j) {
        const float gj = g[j];
        const P r = reinterpret_cast<const P*>(rows + (t * k + j) * dim)[i];
#pragma unroll
        for (int v = 0; v < kVec; ++v) acc[v] = fmaf(gj, to_float(r.v[v]), acc[v]);
      }
      P y;
#pragma unroll
      for (int v = 0; v < kVec; ++v) y.v[v] = from_float<T>(acc[v]);
      o[i] = y;
    }
  }
}

// Grid: kPairWarps rows r = t k + j per block, strided. drows and rows (N k, D), dout (N, D),
// gates and dgates (N k); kVec elements per pack, D % kVec == 0.
template <class T, int kVec>
__global__ void __launch_bounds__(kPairWarps* kWarp)
    combine_backward_kernel(T* drows, float* dgates, const T* dout, const T* rows, const float* gates,
                            std::int64_t pairs, std::int64_t k, std::int64_t dim) {
  using P = Pack<T, kVec>;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t packs = dim / kVec;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kPairWarps;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kPairWarps + threadIdx.x / kWarp; r < pairs;
       r += stride) {
    const float g = gates[r];
    const P* dy = reinterpret_cast<const P*>(dout + (r / k) * dim);
    const P* x = reinterpret_cast<const P*>(rows + r * dim);
    P* dx = reinterpret_cast<P*>(drows + r * dim);
    float dot = 0.0f;
    for (std::int64_t i = lane; i < packs; i += kWarp) {
      const P d = dy[i];
      const P v = x[i];
      P y;
#pragma unroll
      for (int u = 0; u < kVec; ++u) {
        const float du = to_float(d.v[u]);
        y.v[u] = from_float<T>(g * du);
        dot += du * to_float(v.v[u]);
      }
      dx[i] = y;
    }
    dot = warp_sum(dot);
    if (lane == 0) dgates[r] = dot;
  }
}

// ---- launchers ----

unsigned blocks_for(std::int64_t units, std::int64_t per_block) {
  return static_cast<unsigned>(std::min((units + per_block - 1) / per_block, kMaxBlocks));
}

std::string route_text(const char* op, MoeRouteShape s, DType act) {
  return std::string(op) + ": logits (" + std::to_string(s.rows) + ", " + std::to_string(s.experts) + ") in " +
         dtype_name(act) + ", top-" + std::to_string(s.top_k);
}

void check_route(const char* op, MoeRouteShape s, DType act) {
  USTRAIN_ASSERT(is_float_type(act), route_text(op, s, act) + ": unsupported dtype");
  USTRAIN_ASSERT(s.rows >= 0 && s.experts >= 1 && s.experts <= INT_MAX && s.top_k >= 1 && s.top_k <= s.experts,
                 route_text(op, s, act) + ": needs 1 <= k <= E <= 2^31 - 1 and N >= 0");
}

std::string combine_text(const char* op, std::int64_t tokens, std::int64_t k, std::int64_t dim, DType act) {
  return std::string(op) + ": " + std::to_string(tokens) + " tokens, top-" + std::to_string(k) + ", rows of " +
         std::to_string(dim) + " in " + dtype_name(act);
}

void check_combine(const char* op, std::int64_t tokens, std::int64_t k, std::int64_t dim, DType act) {
  USTRAIN_ASSERT(is_float_type(act), combine_text(op, tokens, k, dim, act) + ": unsupported dtype");
  USTRAIN_ASSERT(tokens >= 0 && k >= 0 && dim >= 0, combine_text(op, tokens, k, dim, act) + ": negative size");
}

// Calls launch(std::integral_constant<int, kVec>{}): 16-byte packs when rows of `dim`
// elements at every pointer start 16-byte aligned, else single elements.
template <class T, class Launch>
void with_pack_width(std::int64_t dim, std::initializer_list<const void*> pointers, Launch&& launch) {
  constexpr int kPack = 16 / sizeof(T);
  bool packed = dim % kPack == 0;
  for (const void* p : pointers) packed = packed && aligned16(p);
  if (packed)
    launch(std::integral_constant<int, kPack>{});
  else
    launch(std::integral_constant<int, 1>{});
  USTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void moe_route(std::int32_t* experts, float* gates, float* probs, float* lse, const void* logits, const float* bias,
               MoeRouteShape shape, bool sigmoid, bool renormalize, DType act, cudaStream_t stream) {
  check_route("moe_route", shape, act);
  if (shape.rows == 0) return;
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    route_kernel<T><<<blocks_for(shape.rows, kRowWarps), kRowWarps * kWarp, 0, stream>>>(
        experts, gates, probs, lse, static_cast<const T*>(logits), bias, shape.rows, shape.experts, shape.top_k,
        sigmoid, renormalize);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

void moe_route_backward(void* dlogits, const float* dgates, const void* logits, const float* probs, const float* lse,
                        const std::int32_t* experts, const float* gates, const float* seq_grad, std::int64_t seq_len,
                        MoeRouteShape shape, bool sigmoid, bool renormalize, float z_grad, DType act,
                        cudaStream_t stream) {
  check_route("moe_route_backward", shape, act);
  USTRAIN_ASSERT(seq_grad == nullptr || (seq_len > 0 && shape.rows % seq_len == 0),
                 route_text("moe_route_backward", shape, act) + ": sequences of " + std::to_string(seq_len) +
                     " tokens");
  if (shape.rows == 0) return;
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    route_backward_kernel<T><<<blocks_for(shape.rows, kRowWarps), kRowWarps * kWarp, 0, stream>>>(
        static_cast<T*>(dlogits), dgates, static_cast<const T*>(logits), probs, lse, experts, gates, seq_grad,
        seq_len, shape.rows, shape.experts, shape.top_k, sigmoid, renormalize, z_grad);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

void moe_combine(void* out, const void* rows, const float* gates, std::int64_t tokens, std::int64_t top_k,
                 std::int64_t dim, DType act, cudaStream_t stream) {
  check_combine("moe_combine", tokens, top_k, dim, act);
  if (tokens == 0 || dim == 0) return;
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    with_pack_width<T>(dim, {out, rows}, [&](auto pack) {
      constexpr int kVec = decltype(pack)::value;
      const auto threads = static_cast<int>(std::clamp<std::int64_t>((dim / kVec + kWarp - 1) / kWarp * kWarp, kWarp,
                                                                     kMaxThreads));
      combine_kernel<T, kVec><<<static_cast<unsigned>(std::min(tokens, kMaxBlocks)), threads, 0, stream>>>(
          static_cast<T*>(out), static_cast<const T*>(rows), gates, tokens, top_k, dim);
    });
  });
}

void moe_combine_backward(void* drows, float* dgates, const void* dout, const void* rows, const float* gates,
                          std::int64_t tokens, std::int64_t top_k, std::int64_t dim, DType act, cudaStream_t stream) {
  check_combine("moe_combine_backward", tokens, top_k, dim, act);
  const std::int64_t pairs = tokens * top_k;
  if (pairs == 0) return;  // dim == 0 still writes dgates = 0
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    with_pack_width<T>(dim, {drows, dout, rows}, [&](auto pack) {
      combine_backward_kernel<T, decltype(pack)::value>
          <<<blocks_for(pairs, kPairWarps), kPairWarps * kWarp, 0, stream>>>(
              static_cast<T*>(drows), dgates, static_cast<const T*>(dout), static_cast<const T*>(rows), gates, pairs,
              top_k, dim);
    });
  });
}

}  // namespace ustrain::cuda
