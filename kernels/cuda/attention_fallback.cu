// Causal grouped-query attention on CUDA cores, flash-attention style: tiles of kTile
// query rows meet tiles of kTile key rows in shared memory (fp32), so nothing of size S^2
// is ever stored. Thread layout and tile helpers: attention_tiles.cuh.
//
// Backward: delta_i = dout_i . out_i first; then dq by one block per (query tile, head),
// and dk, dv by one block per (key tile, kv head) that loops over the heads of its group
// and the query tiles at or after it. Each gradient element is summed by one thread in a
// fixed order: deterministic without atomics.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/attention_fallback.h"
#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/scratch_sizes.h"

namespace ustrain::cuda {
namespace {

using namespace tiles;

struct Geometry {
  std::int64_t seq;
  std::int64_t width;      // qkv row: (H + 2 Hkv) * Dh
  std::int64_t out_width;  // out row: H * Dh
  int heads, kv_heads, group, head_dim;
  int ld;  // row stride of a (kTile, Dh) tile in shared memory; odd, so rows hit distinct banks
  float scale;
  __host__ __device__ std::int64_t k_offset(int kv) const { return std::int64_t{heads + kv} * head_dim; }
  __host__ __device__ std::int64_t v_offset(int kv) const {
    return std::int64_t{heads + kv_heads + kv} * head_dim;
  }
};

// A thread of a block over one (query tile, head) of batch row b: grid (query tiles, H, B),
// the tiles with the most keys first. The thread owns query row i = i0 + r and lane `lane`.
struct QueryTileThread {
  std::int64_t i0, b, i;
  int h, kv, r, lane;
};
__device__ __forceinline__ QueryTileThread query_tile_thread(const Geometry& g) {
  QueryTileThread t;
  t.i0 = std::int64_t{gridDim.x - 1 - blockIdx.x} * kTile;
  t.h = static_cast<int>(blockIdx.y);
  t.b = blockIdx.z;
  t.kv = t.h / g.group;
  t.r = static_cast<int>(threadIdx.x) / kLanesPerRow;
  t.lane = static_cast<int>(threadIdx.x) % kLanesPerRow;
  t.i = t.i0 + t.r;
  return t;
}

// k_tile, v_tile (kTile, ld) = key rows [j0, j0 + kTile) of kv head kv, from rows (S, W).
// Waits until no thread reads the previous tiles, and returns when the new ones are complete.
template <class T>
__device__ __forceinline__ void load_key_tiles(float* k_tile, float* v_tile, const T* rows, std::int64_t j0, int kv,
                                               const Geometry& g) {
  __syncthreads();
  load_tile(k_tile, rows + g.k_offset(kv), g.width, j0, g.seq, g);
  load_tile(v_tile, rows + g.v_offset(kv), g.width, j0, g.seq, g);
  __syncthreads();
}

// ---- forward ----

// Grid (query tiles, H, B), the tiles with the most keys first. kDh >= head_dim.
template <class T, int kDh>
__global__ void __launch_bounds__(kThreads) forward_kernel(T* out, float* lse, const T* qkv, const Geometry g) {
  constexpr int kAcc = kDh / kLanesPerRow;
  extern __shared__ float smem[];
  float* q_tile = smem;                   // (kTile, ld)
  float* k_tile = q_tile + kTile * g.ld;  // (kTile, ld)
  float* v_tile = k_tile + kTile * g.ld;  // (kTile, ld)
  float* p_tile = v_tile + kTile * g.ld;  // (kTile, kScoreLd)

  const auto [i0, b, i, h, kv, r, lane] = query_tile_thread(g);
  const T* rows = qkv + b * g.seq * g.width;  // (S, W)

  load_tile(q_tile, rows + std::int64_t{h} * g.head_dim, g.width, i0, g.seq, g);
  float acc[kAcc] = {};  // (Dh) of row i: sum_j exp(s_ij - max) v_j
  float running_max = -INFINITY, running_sum = 0.0f;
  for (std::int64_t j0 = 0; j0 <= i0; j0 += kTile) {  // key tiles up to the diagonal one
    load_key_tiles(k_tile, v_tile, rows, j0, kv, g);

    float s[kColsPerLane] = {};
    for (int d = 0; d < g.head_dim; ++d) {
      const float q = q_tile[r * g.ld + d];
#pragma unroll
      for (int c = 0; c < kColsPerLane; ++c) s[c] += q * k_tile[(lane + c * kLanesPerRow) * g.ld + d];
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) {
      const std::int64_t j = j0 + lane + c * kLanesPerRow;
      s[c] = j <= i ? s[c] * g.scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    const float new_max = fmaxf(running_max, row_max(tile_max));
    const float shift = new_max == -INFINITY ? 0.0f : new_max;  // avoids -inf - -inf
    const float rescale = expf(running_max - shift);
    float tile_sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) {
      const float p = expf(s[c] - shift);
      p_tile[r * kScoreLd + lane + c * kLanesPerRow] = p;
      tile_sum += p;
    }
    running_sum = running_sum * rescale + row_sum(tile_sum);
    running_max = new_max;
    __syncthreads();  // p_tile complete

#pragma unroll
    for (int a = 0; a < kAcc; ++a) acc[a] *= rescale;
    add_weighted_rows(acc, p_tile + r * kScoreLd, v_tile, lane, g);
  }
  if (i >= g.seq) return;
  T* o = out + (b * g.seq + i) * g.out_width + std::int64_t{h} * g.head_dim;  // (Dh)
  store_row(o, acc, lane, g, [running_sum](float x) { return x / running_sum; });
  if (lane == 0) lse[(b * g.heads + h) * g.seq + i] = running_max + logf(running_sum);
}

// ---- backward ----

// delta (B, H, S) = rowsum(dout * out) per head, in double like the CPU op.
// One warp per (b, h, i); grid covers B * H * S warps.
template <class T>
__global__ void __launch_bounds__(kThreads)
    delta_kernel(float* delta, const T* dout, const T* out, const Geometry g, std::int64_t rows) {
  constexpr int kWarpsPerBlock = kThreads / 32;
  const std::int64_t row = std::int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;  // the whole warp leaves together
  const std::int64_t i = row % g.seq;
  const std::int64_t bh = row / g.seq;
  const std::int64_t h = bh % g.heads;
  const std::int64_t b = bh / g.heads;
  const std::int64_t offset = (b * g.seq + i) * g.out_width + h * g.head_dim;
  double acc = 0.0;
  for (int d = lane; d < g.head_dim; d += 32)
    acc += static_cast<double>(to_float(dout[offset + d])) * to_float(out[offset + d]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) delta[row] = static_cast<float>(acc);
}

// dq rows of one (query tile, head): dq_i = scale * sum_{j <= i} p_ij (dp_ij - delta_i) k_j,
// with p_ij = exp(scale q_i . k_j - lse_i) and dp_ij = dout_i . v_j.
// Grid (query tiles, H, B), the tiles with the most keys first.
template <class T, int kDh>
__global__ void __launch_bounds__(kThreads) dq_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                      const float* delta, const Geometry g) {
  constexpr int kAcc = kDh / kLanesPerRow;
  extern __shared__ float smem[];
  float* q_tile = smem;                     // (kTile, ld)
  float* do_tile = q_tile + kTile * g.ld;   // (kTile, ld)
  float* k_tile = do_tile + kTile * g.ld;   // (kTile, ld)
  float* v_tile = k_tile + kTile * g.ld;    // (kTile, ld)
  float* ds_tile = v_tile + kTile * g.ld;   // (kTile, kScoreLd)
  float* tile_lse = ds_tile + kTile * kScoreLd;  // (kTile)
  float* tile_delta = tile_lse + kTile;          // (kTile)

  const auto [i0, b, i, h, kv, r, lane] = query_tile_thread(g);
  const T* rows = qkv + b * g.seq * g.width;  // (S, W)
  const std::int64_t bh = b * g.heads + h;

  load_tile(q_tile, rows + std::int64_t{h} * g.head_dim, g.width, i0, g.seq, g);
  load_tile(do_tile, dout + b * g.seq * g.out_width + std::int64_t{h} * g.head_dim, g.out_width, i0, g.seq, g);
  load_row_values(tile_lse, lse + bh * g.seq, i0, g.seq);
  load_row_values(tile_delta, delta + bh * g.seq, i0, g.seq);

  float acc[kAcc] = {};
  for (std::int64_t j0 = 0; j0 <= i0; j0 += kTile) {
    load_key_tiles(k_tile, v_tile, rows, j0, kv, g);  // the first time, also waits for the loads above

    float s[kColsPerLane] = {}, dp[kColsPerLane] = {};
    for (int d = 0; d < g.head_dim; ++d) {
      const float q = q_tile[r * g.ld + d];
      const float o = do_tile[r * g.ld + d];
#pragma unroll
      for (int c = 0; c < kColsPerLane; ++c) {
        const int col = (lane + c * kLanesPerRow) * g.ld + d;
        s[c] += q * k_tile[col];
        dp[c] += o * v_tile[col];
      }
    }
    const float row_lse = tile_lse[r], row_delta = tile_delta[r];
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) {
      const std::int64_t j = j0 + lane + c * kLanesPerRow;
      const float p = (j <= i && i < g.seq) ? expf(s[c] * g.scale - row_lse) : 0.0f;
      ds_tile[r * kScoreLd + lane + c * kLanesPerRow] = p * (dp[c] - row_delta);
    }
    __syncthreads();  // ds_tile complete
    add_weighted_rows(acc, ds_tile + r * kScoreLd, k_tile, lane, g);
  }
  if (i >= g.seq) return;
  T* dq = dqkv + (b * g.seq + i) * g.width + std::int64_t{h} * g.head_dim;  // (Dh)
  const float scale = g.scale;
  store_row(dq, acc, lane, g, [scale](float x) { return scale * x; });
}

// dk, dv rows of one (key tile, kv head), summed over the group's heads h in order and the
// query rows i >= j:  dv_j = sum p_ij dout_i;  dk_j = scale * sum p_ij (dp_ij - delta_i) q_i.
// Here a thread owns key row c of the tile; its score columns are query rows.
// Grid (key tiles, Hkv, B).
template <class T, int kDh>
__global__ void __launch_bounds__(kThreads) dkv_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                       const float* delta, const Geometry g) {
  constexpr int kAcc = kDh / kLanesPerRow;
  extern __shared__ float smem[];
  float* k_tile = smem;                          // (kTile, ld)
  float* v_tile = k_tile + kTile * g.ld;         // (kTile, ld)
  float* q_tile = v_tile + kTile * g.ld;         // (kTile, ld)
  float* do_tile = q_tile + kTile * g.ld;        // (kTile, ld)
  float* p_tile = do_tile + kTile * g.ld;        // (kTile query rows, kScoreLd)
  float* ds_tile = p_tile + kTile * kScoreLd;    // (kTile query rows, kScoreLd)
  float* tile_lse = ds_tile + kTile * kScoreLd;  // (kTile)
  float* tile_delta = tile_lse + kTile;          // (kTile)

  const std::int64_t j0 = std::int64_t{blockIdx.x} * kTile;
  const int kv = static_cast<int>(blockIdx.y);
  const std::int64_t b = blockIdx.z;
  const int c = static_cast<int>(threadIdx.x) / kLanesPerRow;  // key row in the tile
  const int lane = static_cast<int>(threadIdx.x) % kLanesPerRow;
  const std::int64_t j = j0 + c;
  const T* rows = qkv + b * g.seq * g.width;  // (S, W)
  const T* dout_rows = dout + b * g.seq * g.out_width;  // (S, H * Dh)

  load_tile(k_tile, rows + g.k_offset(kv), g.width, j0, g.seq, g);
  load_tile(v_tile, rows + g.v_offset(kv), g.width, j0, g.seq, g);

  float dk[kAcc] = {}, dv[kAcc] = {};
  for (int h = kv * g.group; h < (kv + 1) * g.group; ++h) {
    const std::int64_t bh = b * g.heads + h;
    for (std::int64_t i0 = j0; i0 < g.seq; i0 += kTile) {  // query tiles at or after the diagonal
      __syncthreads();  // the previous query tile is no longer read
      load_tile(q_tile, rows + std::int64_t{h} * g.head_dim, g.width, i0, g.seq, g);
      load_tile(do_tile, dout_rows + std::int64_t{h} * g.head_dim, g.out_width, i0, g.seq, g);
      load_row_values(tile_lse, lse + bh * g.seq, i0, g.seq);
      load_row_values(tile_delta, delta + bh * g.seq, i0, g.seq);
      __syncthreads();

      float s[kColsPerLane] = {}, dp[kColsPerLane] = {};
      for (int d = 0; d < g.head_dim; ++d) {
        const float k = k_tile[c * g.ld + d];
        const float v = v_tile[c * g.ld + d];
#pragma unroll
        for (int a = 0; a < kColsPerLane; ++a) {
          const int row = (lane + a * kLanesPerRow) * g.ld + d;
          s[a] += q_tile[row] * k;
          dp[a] += do_tile[row] * v;
        }
      }
#pragma unroll
      for (int a = 0; a < kColsPerLane; ++a) {
        const int r = lane + a * kLanesPerRow;
        const std::int64_t i = i0 + r;
        const float p = (j <= i && i < g.seq) ? expf(s[a] * g.scale - tile_lse[r]) : 0.0f;
        p_tile[r * kScoreLd + c] = p;
        ds_tile[r * kScoreLd + c] = p * (dp[a] - tile_delta[r]);
      }
      __syncthreads();  // p_tile and ds_tile complete

      for (int r = 0; r < kTile; ++r) {
        const float p = p_tile[r * kScoreLd + c];
        const float ds = ds_tile[r * kScoreLd + c];
#pragma unroll
        for (int a = 0; a < kAcc; ++a) {
          const int d = lane + a * kLanesPerRow;
          if (d < g.head_dim) {
            dv[a] += p * do_tile[r * g.ld + d];
            dk[a] += ds * q_tile[r * g.ld + d];
          }
        }
      }
    }
  }
  if (j >= g.seq) return;
  T* dk_row = dqkv + (b * g.seq + j) * g.width + g.k_offset(kv);  // (Dh)
  T* dv_row = dqkv + (b * g.seq + j) * g.width + g.v_offset(kv);  // (Dh)
#pragma unroll
  for (int a = 0; a < kAcc; ++a) {  // both rows in one loop (two store_row calls compile to more code)
    const int d = lane + a * kLanesPerRow;
    if (d < g.head_dim) {
      dk_row[d] = from_float<T>(g.scale * dk[a]);
      dv_row[d] = from_float<T>(dv[a]);
    }
  }
}

// ---- launchers ----

std::size_t forward_smem(const Geometry& g) { return forward_smem_bytes(g.ld); }
std::size_t dq_smem(const Geometry& g) { return dq_smem_bytes(g.ld); }
std::size_t dkv_smem(const Geometry& g) { return dkv_smem_bytes(g.ld); }

std::string describe(const char* op, DType act, std::int64_t batch, std::int64_t seq, int heads, int kv_heads,
                     int head_dim) {
  return std::string(op) + " (" + dtype_name(act) + "): qkv (B, S, (H + 2 Hkv) Dh) with B=" + std::to_string(batch) +
         ", S=" + std::to_string(seq) + ", H=" + std::to_string(heads) + ", Hkv=" + std::to_string(kv_heads) +
         ", Dh=" + std::to_string(head_dim);
}

Geometry geometry(const char* op, DType act, std::int64_t batch, std::int64_t seq, int heads, int kv_heads,
                  int head_dim) {
  const std::string what = describe(op, act, batch, seq, heads, kv_heads, head_dim);
  USTRAIN_ASSERT(is_float_type(act), what + ": unsupported dtype");
  USTRAIN_ASSERT(batch >= 0 && seq >= 0, what + ": negative size");
  USTRAIN_ASSERT(heads > 0 && kv_heads > 0 && heads % kv_heads == 0, what + ": H must be a multiple of Hkv");
  USTRAIN_ASSERT(head_dim >= 1 && head_dim <= kMaxHeadDim,
                 what + ": head_dim must lie in [1, " + std::to_string(kMaxHeadDim) + "]");
  USTRAIN_ASSERT(batch <= 65535 && heads <= 65535, what + ": B and H must fit a grid dimension (65535)");
  USTRAIN_ASSERT(seq / kTile < 0x7fffffff, what + ": too many tiles for one grid");
  Geometry g{};
  g.seq = seq;
  g.heads = heads;
  g.kv_heads = kv_heads;
  g.group = heads / kv_heads;
  g.head_dim = head_dim;
  g.width = std::int64_t{heads + 2 * kv_heads} * head_dim;
  g.out_width = std::int64_t{heads} * head_dim;
  g.ld = tile_ld(head_dim);
  g.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  return g;
}

}  // namespace

void attention_fallback_forward(void* out, float* lse, const void* qkv, std::int64_t batch, std::int64_t seq,
                                int n_heads, int n_kv_heads, int head_dim, DType act, cudaStream_t stream) {
  const char* op = "attention_fallback_forward";
  const Geometry g = geometry(op, act, batch, seq, n_heads, n_kv_heads, head_dim);
  if (batch == 0 || seq == 0) return;
  with_kind(act, head_dim, op, [&](auto kind) {
    using T = typename decltype(kind)::type;
    constexpr int kDh = decltype(kind)::head_dim_bound;
    const std::size_t smem = forward_smem(g);
    allow_shared_memory(forward_kernel<T, kDh>, smem, g.head_dim, op);
    const dim3 grid(tile_count(seq), static_cast<unsigned>(n_heads), static_cast<unsigned>(batch));
    forward_kernel<T, kDh><<<grid, kThreads, smem, stream>>>(static_cast<T*>(out), lse, static_cast<const T*>(qkv), g);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

std::size_t attention_fallback_backward_workspace_bytes(std::int64_t batch, std::int64_t seq, int n_heads,
                                                        int /*n_kv_heads*/, int /*head_dim*/) {
  return attention_backward_rows_bytes(batch, n_heads, seq);
}

void attention_fallback_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                                 std::int64_t batch, std::int64_t seq, int n_heads, int n_kv_heads, int head_dim,
                                 DType act, void* workspace, cudaStream_t stream) {
  const char* op = "attention_fallback_backward";
  const Geometry g = geometry(op, act, batch, seq, n_heads, n_kv_heads, head_dim);
  if (batch == 0 || seq == 0) return;
  USTRAIN_ASSERT(workspace != nullptr, describe(op, act, batch, seq, n_heads, n_kv_heads, head_dim) + ": no workspace");
  float* delta = static_cast<float*>(workspace);  // (B, H, S)
  const std::int64_t rows = batch * n_heads * seq;
  constexpr int kRowsPerBlock = kThreads / 32;
  const std::int64_t delta_blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  USTRAIN_ASSERT(delta_blocks <= 0x7fffffff,
                 describe(op, act, batch, seq, n_heads, n_kv_heads, head_dim) + ": too many rows for one grid");

  with_kind(act, head_dim, op, [&](auto kind) {
    using T = typename decltype(kind)::type;
    constexpr int kDh = decltype(kind)::head_dim_bound;
    T* dx = static_cast<T*>(dqkv);
    const T* x = static_cast<const T*>(qkv);
    const T* dy = static_cast<const T*>(dout);

    const T* y = static_cast<const T*>(out);
    delta_kernel<T><<<static_cast<unsigned>(delta_blocks), kThreads, 0, stream>>>(delta, dy, y, g, rows);
    USTRAIN_CUDA_CHECK_LAUNCH();

    const std::size_t dq_bytes = dq_smem(g);
    allow_shared_memory(dq_kernel<T, kDh>, dq_bytes, g.head_dim, op);
    const dim3 dq_grid(tile_count(seq), static_cast<unsigned>(n_heads), static_cast<unsigned>(batch));
    dq_kernel<T, kDh><<<dq_grid, kThreads, dq_bytes, stream>>>(dx, dy, x, lse, delta, g);
    USTRAIN_CUDA_CHECK_LAUNCH();

    const std::size_t dkv_bytes = dkv_smem(g);
    allow_shared_memory(dkv_kernel<T, kDh>, dkv_bytes, g.head_dim, op);
    const dim3 dkv_grid(tile_count(seq), static_cast<unsigned>(n_kv_heads), static_cast<unsigned>(batch));
    dkv_kernel<T, kDh><<<dkv_grid, kThreads, dkv_bytes, stream>>>(dx, dy, x, lse, delta, g);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ustrain::cuda
