// The mask of one block of attention on the device (attention_blocks.cu): which key rows each
// query row of the block sees (AttentionBlock in attention_blocks.h, the conditions of
// kernels/attention_mask.h), and the bounds that let a tile of query rows skip the tiles of key
// rows it cannot see, and the other way round. A causal mask and a window bound a band of
// diagonals; document ids are compared row against row, and a pair of tiles whose ranges of
// ids do not meet is skipped whole. Include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/cuda/attention_tiles.cuh"

namespace ustrain::cuda::tiles {

static_assert(kTile == 32, "a tile's document ids are loaded and reduced by one warp");

struct BlockMask {
  std::int64_t nq, nk;       // the block's query and key rows
  bool causal;               // end-aligned: row r sees keys [0, r + 1 + nk - nq)
  std::int64_t window;       // 0: none; else r - c + diagonal < window
  std::int64_t diagonal;     // the absolute position of query row r minus key row r's
  const std::int32_t* q_documents;  // null: one document
  const std::int32_t* k_documents;
  std::int64_t q_documents_stride, k_documents_stride;

  // Query row i sees keys in [key_begin(i), key_end(i)), document ids permitting.
  __device__ std::int64_t key_begin(std::int64_t i) const {
    if (window <= 0) return 0;
    const std::int64_t begin = i + diagonal - window + 1;
    return begin < 0 ? 0 : (begin > nk ? nk : begin);
  }
  __device__ std::int64_t key_end(std::int64_t i) const {
    if (!causal) return nk;
    const std::int64_t end = i + 1 + nk - nq;
    return end < 0 ? 0 : (end > nk ? nk : end);
  }
  // Key j is seen by query rows in [first_query(j), query_end(j)), document ids permitting.
  __device__ std::int64_t first_query(std::int64_t j) const {
    if (!causal) return 0;
    const std::int64_t i = j - (nk - nq);
    return i < 0 ? 0 : i;
  }
  __device__ std::int64_t query_end(std::int64_t j) const {
    if (window <= 0) return nq;
    const std::int64_t end = j - diagonal + window;
    return end < 0 ? 0 : (end > nq ? nq : end);
  }
  __device__ bool in_band(std::int64_t i, std::int64_t j) const { return j >= key_begin(i) && j < key_end(i); }
  __device__ bool has_documents() const { return q_documents != nullptr; }
};

// The document ids of a tile's rows in shared memory, and their range (lo > hi: no row).
struct DocumentTile {
  int ids[kTile];
  int lo, hi;
};

// tile = the ids of rows [row0, row0 + kTile) of batch row b in `documents` (row stride
// `stride`), rows at or past `rows` none. Block-wide: waits until no thread reads the tile's
// previous ids, and returns when the new ones are complete.
inline __device__ void load_documents(DocumentTile& tile, const std::int32_t* documents, std::int64_t stride,
                                      std::int64_t b, std::int64_t row0, std::int64_t rows) {
  __syncthreads();
  if (threadIdx.x < kTile) {
    const std::int64_t row = row0 + threadIdx.x;
    const bool valid = row < rows;
    const int id = valid ? documents[b * stride + row] : 0;
    tile.ids[threadIdx.x] = id;
    int lo = valid ? id : INT_MAX, hi = valid ? id : INT_MIN;
#pragma unroll
    for (int offset = kTile / 2; offset > 0; offset /= 2) {
      lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, offset));
      hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, offset));
    }
    if (threadIdx.x == 0) {
      tile.lo = lo;
      tile.hi = hi;
    }
  }
  __syncthreads();
}

// Whether some row of one tile may share a document with some row of the other.
inline __device__ bool may_share_a_document(const DocumentTile& a, const DocumentTile& b) {
  return a.lo <= a.hi && b.lo <= b.hi && a.lo <= b.hi && b.lo <= a.hi;
}

// Whether query row i (row r of its tile q) sees key row j (row c of its tile k).
inline __device__ bool sees(const BlockMask& m, std::int64_t i, std::int64_t j, const DocumentTile& q, int r,
                            const DocumentTile& k, int c) {
  return m.in_band(i, j) && (!m.has_documents() || q.ids[r] == k.ids[c]);
}

}  // namespace ustrain::cuda::tiles
