// What our block attention kernels share (attention_blocks.cu, the forward and the host checks;
// attention_block_backward.cu, the backward): a block's geometry in the fused buffers and its
// mask, the query tile a thread works on, and the helpers their launchers dispatch with.
// Include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/attention/attention_block_mask.cuh"
#include "kernels/cuda/attention/attention_blocks.h"
#include "kernels/cuda/attention/attention_tiles.cuh"
#include "kernels/cuda/cuda_check.h"

namespace ustrain::cuda::block_kernels {

using namespace tiles;

struct BlockGeometry {
  std::int64_t q_seq, kv_seq;      // rows of qkv (and out, dout, lse) and of the keys per batch row
  std::int64_t q_begin, k_begin;   // the block's first query and key row
  std::int64_t nq, nk;             // its query and key rows
  std::int64_t width;              // qkv row: (H + 2 Hkv) * Dh
  std::int64_t kv_stride;          // a key row: kv's 2 Hkv Dh, or qkv's W (a self block)
  std::int64_t out_width;          // out row: H * Dh
  std::int64_t dq_stride;          // a dq row: H Dh, or dqkv's W (a self block)
  int heads, kv_heads, group, head_dim;
  int ld;  // row stride of a (kTile, Dh) tile in shared memory
  float scale;
  bool accumulate;  // the gradients add to what dq and dkv hold (packed blocks), else overwrite them
  BlockMask mask;
  // The block's query rows of head h in batch row b of a (B, Sq, row_width) tensor.
  __device__ std::int64_t query_offset(std::int64_t b, int h, std::int64_t row_width) const {
    return (b * q_seq + q_begin) * row_width + std::int64_t{h} * head_dim;
  }
  // The block's key rows of kv head kv in batch row b, from the keys' first column (kv's, or
  // qkv's after the H query heads); values follow Hkv heads later, in both layouts.
  __device__ std::int64_t key_offset(std::int64_t b, int kv) const {
    return (b * kv_seq + k_begin) * kv_stride + std::int64_t{kv} * head_dim;
  }
  __device__ std::int64_t value_shift() const { return std::int64_t{kv_heads} * head_dim; }
};

// A thread of a block over one (query tile, head) of batch row b: grid (query tiles, H, B),
// the tiles with the most keys first. The thread owns query row i = i0 + r and lane `lane`.
struct QueryTileThread {
  std::int64_t i0, b, i;
  int h, kv, r, lane;
  // The keys any row of the tile may see: from its first row's first to its last row's last.
  std::int64_t key_begin, tile_keys;
};
__device__ __forceinline__ QueryTileThread query_tile_thread(const BlockGeometry& g) {
  QueryTileThread t;
  t.i0 = std::int64_t{gridDim.x - 1 - blockIdx.x} * kTile;
  t.h = static_cast<int>(blockIdx.y);
  t.b = blockIdx.z;
  t.kv = t.h / g.group;
  t.r = static_cast<int>(threadIdx.x) / kLanesPerRow;
  t.lane = static_cast<int>(threadIdx.x) % kLanesPerRow;
  t.i = t.i0 + t.r;
  const std::int64_t last = t.i0 + kTile < g.nq ? t.i0 + kTile : g.nq;
  t.key_begin = g.mask.band.key_begin(t.i0);
  t.tile_keys = g.mask.band.key_end(last - 1);
  return t;
}

// Loads the document ids of the key tile from j0 when the mask has documents; false when no
// query row of the tile (ids in q_docs) may see a key of it: the tile is skipped.
__device__ __forceinline__ bool key_tile_may_be_seen(DocumentTile& k_docs, const DocumentTile& q_docs,
                                                     const QueryTileThread& t, std::int64_t j0,
                                                     const BlockGeometry& g) {
  if (!g.mask.has_documents()) return true;
  load_documents(k_docs, g.mask.k_documents, g.mask.k_documents_stride, t.b, j0, g.nk);
  return may_share_a_document(q_docs, k_docs);
}

// k_tile, v_tile (kTile, ld) = the block's key rows [j0, j0 + kTile) from keys (nk, Dh) and
// their values, row stride kv_stride. Waits until no thread reads the previous tiles, and
// returns when the new ones are complete.
template <class T>
__device__ __forceinline__ void load_key_tiles(float* k_tile, float* v_tile, const T* keys, std::int64_t j0,
                                               const BlockGeometry& g) {
  __syncthreads();
  load_tile(k_tile, keys, g.kv_stride, j0, g.nk, g);
  load_tile(v_tile, keys + g.value_shift(), g.kv_stride, j0, g.nk, g);
  __syncthreads();
}

// "op (act): query rows [..) of Sq, key rows [..) of Skv, B=, H=, ..., the mask", for messages.
std::string describe(const char* op, DType act, const AttentionBlock& a);
// The kernels' geometry of block `a`, after checking it (internal errors naming op and block).
BlockGeometry geometry(const char* op, DType act, const AttentionBlock& a);

// Calls f(R{}) for the element type R of a result in `type`: fp32, or the activations' T.
template <class T, class F>
void with_result_type(DType type, DType act, const std::string& what, F&& f) {
  USTRAIN_ASSERT(type == DType::f32 || type == act,
                 what + " must be f32 or " + dtype_name(act) + ", got " + dtype_name(type));
  if (type == DType::f32) f(float{});
  else f(T{});
}

// The keys' first column: kv's, or qkv's after the H query heads (a self block).
template <class T>
const T* keys_of(const void* qkv, const void* kv, const AttentionBlock& a) {
  return a.self ? static_cast<const T*>(qkv) + std::int64_t{a.heads} * a.head_dim : static_cast<const T*>(kv);
}

}  // namespace ustrain::cuda::block_kernels
