// The backward of a block of attention on CUDA cores (attention_blocks.cu is the forward):
// delta_i = dout_i . out_i first (out the merged result); then dq += by one block per (query
// tile, head), and dk, dv += by one block per (key tile, kv head) that loops over the heads of
// its group and the query tiles that see its keys, both skipping the tiles the mask leaves no
// pair in. Packed blocks' gradient sums accumulate in fp32; a self block overwrites its
// gradient. Each gradient element is summed by one thread in a fixed order: deterministic
// without atomics.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/attention/attention_block_geometry.cuh"
#include "kernels/cuda/scratch_sizes.h"

namespace ustrain::cuda {
namespace block_kernels {
namespace {

// A gradient element's new value: added to what it holds (packed blocks' fp32 sums), or the
// block's alone (a self block overwrites).
template <class TG>
__device__ __forceinline__ float gradient(const TG* held, float block, const BlockGeometry& g) {
  return g.accumulate ? to_float(*held) + block : block;
}

// delta (B, H, nq) = rowsum(dout * out) per head over the block's query rows, in double like
// the CPU op. One warp per (b, h, i); grid covers B * H * nq warps.
template <class TD, class TO>
__global__ void __launch_bounds__(kThreads)
    block_delta_kernel(float* delta, const TD* dout, const TO* out, const BlockGeometry g, std::int64_t rows) {
  constexpr int kWarpsPerBlock = kThreads / 32;
  const std::int64_t row = std::int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= rows) return;  // the whole warp leaves together
  const std::int64_t i = row % g.nq;
  const std::int64_t bh = row / g.nq;
  const auto h = static_cast<int>(bh % g.heads);
  const std::int64_t b = bh / g.heads;
  const std::int64_t offset = g.query_offset(b, h, g.out_width) + i * g.out_width;
  double acc = 0.0;
  for (int d = lane; d < g.head_dim; d += 32)
    acc += static_cast<double>(to_float(dout[offset + d])) * to_float(out[offset + d]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) delta[row] = static_cast<float>(acc);
}

// The backward kernels' dynamic shared memory (dq_smem_bytes, dkv_smem_bytes), in this order:
// the k, v, q and dout tiles (kTile, ld), the ds tile (kTile, kScoreLd), the query rows' lse and
// delta (kTile), and last the p tile (kTile, kScoreLd), which only the dk, dv kernel has.
struct BackwardTiles {
  float *k, *v, *q, *dout, *ds, *lse, *delta, *p;
  __device__ BackwardTiles(float* smem, int ld)
      : k(smem),
        v(k + kTile * ld),
        q(v + kTile * ld),
        dout(q + kTile * ld),
        ds(dout + kTile * ld),
        lse(ds + kTile * kScoreLd),
        delta(lse + kTile),
        p(delta + kTile) {}
};

// Query tile i0's rows of head h: the q and dout rows, their merged lse and their delta.
template <class T>
__device__ __forceinline__ void load_query_rows(float* q_tile, float* do_tile, float* tile_lse, float* tile_delta,
                                                const T* qkv, const T* dout, const float* lse, const float* delta,
                                                std::int64_t b, int h, std::int64_t i0, const BlockGeometry& g) {
  const std::int64_t bh = b * g.heads + h;
  load_tile(q_tile, qkv + g.query_offset(b, h, g.width), g.width, i0, g.nq, g);
  load_tile(do_tile, dout + g.query_offset(b, h, g.out_width), g.out_width, i0, g.nq, g);
  load_row_values(tile_lse, lse + bh * g.q_seq + g.q_begin, i0, g.nq);
  load_row_values(tile_delta, delta + bh * g.nq, i0, g.nq);
}

// dq rows of one (query tile, head) += (or =) scale * sum_{j visible} p_ij (dp_ij - delta_i) k_j,
// with p_ij = exp(scale q_i . k_j - lse_i) (the merged lse) and dp_ij = dout_i . v_j.
// Grid (query tiles, H, B); dq in TG (fp32, or T).
template <class T, class TG, int kDh>
__global__ void __launch_bounds__(kThreads)
    block_dq_kernel(TG* dq, const T* dout, const T* qkv, const T* kv, const float* lse, const float* delta,
                    const BlockGeometry g) {
  constexpr int kAcc = kDh / kLanesPerRow;
  extern __shared__ float smem[];
  const BackwardTiles tiles(smem, g.ld);
  __shared__ DocumentTile q_docs, k_docs;

  const QueryTileThread t = query_tile_thread(g);
  const T* keys = kv + g.key_offset(t.b, t.kv);  // (nk, Dh), row stride kv_stride
  if (g.mask.has_documents())
    load_documents(q_docs, g.mask.q_documents, g.mask.q_documents_stride, t.b, t.i0, g.nq);

  load_query_rows(tiles.q, tiles.dout, tiles.lse, tiles.delta, qkv, dout, lse, delta, t.b, t.h, t.i0, g);

  float acc[kAcc] = {};
  for (std::int64_t j0 = t.key_begin; j0 < t.tile_keys; j0 += kTile) {
    if (!key_tile_may_be_seen(k_docs, q_docs, t, j0, g)) continue;
    load_key_tiles(tiles.k, tiles.v, keys, j0, g);  // the first time, also waits for the loads above

    float s[kColsPerLane] = {}, dp[kColsPerLane] = {};
    for (int d = 0; d < g.head_dim; ++d) {
      const float q = tiles.q[t.r * g.ld + d];
      const float o = tiles.dout[t.r * g.ld + d];
#pragma unroll
      for (int c = 0; c < kColsPerLane; ++c) {
        const int col = (t.lane + c * kLanesPerRow) * g.ld + d;
        s[c] += q * tiles.k[col];
        dp[c] += o * tiles.v[col];
      }
    }
    const float row_lse = tiles.lse[t.r], row_delta = tiles.delta[t.r];
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) {
      const int col = t.lane + c * kLanesPerRow;
      const bool seen = t.i < g.nq && sees(g.mask, t.i, j0 + col, q_docs, t.r, k_docs, col);
      const float p = seen ? expf(s[c] * g.scale - row_lse) : 0.0f;
      tiles.ds[t.r * kScoreLd + col] = p * (dp[c] - row_delta);
    }
    __syncthreads();  // the ds tile complete
    add_weighted_rows(acc, tiles.ds + t.r * kScoreLd, tiles.k, t.lane, g);
  }
  if (t.i >= g.nq) return;
  TG* dq_row = dq + g.query_offset(t.b, t.h, g.dq_stride) + t.i * g.dq_stride;  // (Dh)
#pragma unroll
  for (int a = 0; a < kAcc; ++a) {
    const int d = t.lane + a * kLanesPerRow;
    if (d < g.head_dim) dq_row[d] = from_float<TG>(gradient(dq_row + d, g.scale * acc[a], g));
  }
}

// Key row c of the tile against the lane's query rows of the query tile: s += q_i . k_c and
// dp += dout_i . v_c.
__device__ __forceinline__ void key_row_dots(float (&s)[kColsPerLane], float (&dp)[kColsPerLane], const float* q_tile,
                                             const float* do_tile, const float* k_tile, const float* v_tile, int c,
                                             int lane, const BlockGeometry& g) {
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
}

// Column c (key row j) of p_tile and ds_tile for the lane's query rows r of the tile at i0:
// p_rj = exp(scale s - lse_r) where query i0 + r sees key j, else 0, and ds_rj = p_rj (dp - delta_r).
__device__ __forceinline__ void key_row_probabilities(float* p_tile, float* ds_tile, const float (&s)[kColsPerLane],
                                                      const float (&dp)[kColsPerLane], const float* tile_lse,
                                                      const float* tile_delta, std::int64_t i0, std::int64_t j, int c,
                                                      int lane, const DocumentTile& q_docs,
                                                      const DocumentTile& k_docs, const BlockGeometry& g) {
#pragma unroll
  for (int a = 0; a < kColsPerLane; ++a) {
    const int r = lane + a * kLanesPerRow;
    const std::int64_t i = i0 + r;
    const bool seen = i < g.nq && sees(g.mask, i, j, q_docs, r, k_docs, c);
    const float p = seen ? expf(s[a] * g.scale - tile_lse[r]) : 0.0f;
    p_tile[r * kScoreLd + c] = p;
    ds_tile[r * kScoreLd + c] = p * (dp[a] - tile_delta[r]);
  }
}

// Over the tile's query rows r in order: dv += p_rc dout_r and dk += ds_rc q_r, on the lane's
// columns of key row c.
template <int kAcc>
__device__ __forceinline__ void accumulate_key_gradients(float (&dk)[kAcc], float (&dv)[kAcc], const float* p_tile,
                                                         const float* ds_tile, const float* q_tile,
                                                         const float* do_tile, int c, int lane,
                                                         const BlockGeometry& g) {
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

// The lane's columns of a key row's gradients: dk (scaled) and dv.
template <class TG, int kAcc>
__device__ __forceinline__ void store_key_gradients(TG* dk_row, const float (&dk)[kAcc], const float (&dv)[kAcc],
                                                    int lane, const BlockGeometry& g) {
  TG* dv_row = dk_row + g.value_shift();  // (Dh)
#pragma unroll
  for (int a = 0; a < kAcc; ++a) {  // both rows in one loop (two store_row calls compile to more code)
    const int d = lane + a * kLanesPerRow;
    if (d < g.head_dim) {
      dk_row[d] = from_float<TG>(gradient(dk_row + d, g.scale * dk[a], g));
      dv_row[d] = from_float<TG>(gradient(dv_row + d, dv[a], g));
    }
  }
}

// dk, dv rows of one (key tile, kv head) +=, summed over the group's heads h in order and the
// query rows i that see key j:  dv_j = sum p_ij dout_i;  dk_j = scale * sum p_ij (dp_ij - delta_i) q_i.
// Here a thread owns key row c of the tile; its score columns are query rows.
// Grid (key tiles, Hkv, B); dkv in TG (fp32, or T), from the key gradients' first column.
template <class T, class TG, int kDh>
__global__ void __launch_bounds__(kThreads)
    block_dkv_kernel(TG* dkv, const T* dout, const T* qkv, const T* kv, const float* lse, const float* delta,
                     const BlockGeometry g) {
  constexpr int kAcc = kDh / kLanesPerRow;
  extern __shared__ float smem[];
  const BackwardTiles tiles(smem, g.ld);
  __shared__ DocumentTile q_docs, k_docs;

  const std::int64_t j0 = std::int64_t{blockIdx.x} * kTile;
  const int kv_head = static_cast<int>(blockIdx.y);
  const std::int64_t b = blockIdx.z;
  const int c = static_cast<int>(threadIdx.x) / kLanesPerRow;  // key row in the tile
  const int lane = static_cast<int>(threadIdx.x) % kLanesPerRow;
  const std::int64_t j = j0 + c;
  const std::int64_t key_offset = g.key_offset(b, kv_head);  // into the keys and their gradients

  load_tile(tiles.k, kv + key_offset, g.kv_stride, j0, g.nk, g);
  load_tile(tiles.v, kv + key_offset + g.value_shift(), g.kv_stride, j0, g.nk, g);
  // The query tiles with a row that may see a key of this tile.
  const std::int64_t first_tile = g.mask.band.first_query(j0) / kTile * kTile;
  const std::int64_t query_end = g.mask.band.query_end((j0 + kTile < g.nk ? j0 + kTile : g.nk) - 1);
  if (g.mask.has_documents()) load_documents(k_docs, g.mask.k_documents, g.mask.k_documents_stride, b, j0, g.nk);

  float dk[kAcc] = {}, dv[kAcc] = {};
  for (int h = kv_head * g.group; h < (kv_head + 1) * g.group; ++h) {
    for (std::int64_t i0 = first_tile; i0 < query_end; i0 += kTile) {
      if (g.mask.has_documents()) {
        load_documents(q_docs, g.mask.q_documents, g.mask.q_documents_stride, b, i0, g.nq);
        if (!may_share_a_document(q_docs, k_docs)) continue;
      }
      __syncthreads();  // the previous query tile is no longer read
      load_query_rows(tiles.q, tiles.dout, tiles.lse, tiles.delta, qkv, dout, lse, delta, b, h, i0, g);
      __syncthreads();

      float s[kColsPerLane] = {}, dp[kColsPerLane] = {};
      key_row_dots(s, dp, tiles.q, tiles.dout, tiles.k, tiles.v, c, lane, g);
      key_row_probabilities(tiles.p, tiles.ds, s, dp, tiles.lse, tiles.delta, i0, j, c, lane, q_docs, k_docs, g);
      __syncthreads();  // the p and ds tiles complete
      accumulate_key_gradients(dk, dv, tiles.p, tiles.ds, tiles.q, tiles.dout, c, lane, g);
    }
  }
  if (j >= g.nk) return;
  store_key_gradients(dkv + key_offset + j * g.kv_stride, dk, dv, lane, g);
}

// delta for dout in T and out in T or fp32.
template <class T>
void launch_delta(float* delta, const T* dout, const void* out, DType out_type, const BlockGeometry& g,
                  std::int64_t rows, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kThreads / 32;
  const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (out_type == DType::f32)
    block_delta_kernel<T, float><<<blocks, kThreads, 0, stream>>>(delta, dout, static_cast<const float*>(out), g, rows);
  else
    block_delta_kernel<T, T><<<blocks, kThreads, 0, stream>>>(delta, dout, static_cast<const T*>(out), g, rows);
  USTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace block_kernels

using namespace block_kernels;

std::size_t attention_block_backward_workspace_bytes(const AttentionBlock& a) {
  return attention_backward_rows_bytes(a.batch, a.heads, a.q_count);
}

void attention_block_backward(void* dq, void* dkv, DType grad_type, const void* dout, const void* qkv,
                              const void* kv, const void* out, DType out_type, const float* lse,
                              const AttentionBlock& a, DType act, void* workspace, cudaStream_t stream) {
  const char* op = "attention_block_backward";
  const BlockGeometry g = geometry(op, act, a);
  USTRAIN_ASSERT(out_type == act || out_type == DType::f32,
                 describe(op, act, a) + ": out must be " + dtype_name(act) + " or f32, got " + dtype_name(out_type));
  USTRAIN_ASSERT(a.self || grad_type == DType::f32, describe(op, act, a) + ": packed blocks' gradient sums are f32");
  if (a.batch == 0 || a.q_count == 0 || a.k_count == 0) return;
  USTRAIN_ASSERT(workspace != nullptr, describe(op, act, a) + ": no workspace");
  float* delta = static_cast<float*>(workspace);  // (B, H, nq)
  const std::int64_t rows = a.batch * a.heads * a.q_count;
  USTRAIN_ASSERT(rows / (kThreads / 32) < 0x7fffffff, describe(op, act, a) + ": too many rows for one grid");

  tiles::with_kind(act, a.head_dim, op, [&](auto kind) {
    using T = typename decltype(kind)::type;
    constexpr int kDh = decltype(kind)::head_dim_bound;
    const T* x = static_cast<const T*>(qkv);
    const T* keys = keys_of<T>(qkv, kv, a);
    const T* dy = static_cast<const T*>(dout);
    launch_delta(delta, dy, out, out_type, g, rows, stream);
    with_result_type<T>(grad_type, act, describe(op, act, a) + ": dq", [&](auto result) {
      using TG = decltype(result);
      TG* dq_rows = static_cast<TG*>(dq);
      // A self block's key gradients are dqkv's k and v columns.
      TG* dkv_rows = a.self ? dq_rows + std::int64_t{a.heads} * a.head_dim : static_cast<TG*>(dkv);

      const std::size_t dq_bytes = dq_smem_bytes(g.ld);
      allow_shared_memory(block_dq_kernel<T, TG, kDh>, dq_bytes, g.head_dim, op);
      const dim3 dq_grid(tile_count(a.q_count), static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
      block_dq_kernel<T, TG, kDh><<<dq_grid, kThreads, dq_bytes, stream>>>(dq_rows, dy, x, keys, lse, delta, g);
      USTRAIN_CUDA_CHECK_LAUNCH();

      const std::size_t dkv_bytes = dkv_smem_bytes(g.ld);
      allow_shared_memory(block_dkv_kernel<T, TG, kDh>, dkv_bytes, g.head_dim, op);
      const dim3 dkv_grid(tile_count(a.k_count), static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(a.batch));
      block_dkv_kernel<T, TG, kDh><<<dkv_grid, kThreads, dkv_bytes, stream>>>(dkv_rows, dy, x, keys, lse, delta, g);
      USTRAIN_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace ustrain::cuda
