// The mask of one block of attention on the device (attention_blocks.cu): which key rows each
// query row of the block sees (AttentionBlock in attention_blocks.h, the conditions of
// kernels/attention_mask.h). The causal order and the window leave a band of diagonals
// (attention_block_band.h) that bounds the loops over tiles; document ids are compared row
// against row, and a pair of tiles whose ranges of ids do not meet is skipped whole. Include
// from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/cuda/attention/attention_block_band.h"
#include "kernels/cuda/attention/attention_tiles.cuh"

namespace ustrain::cuda::tiles {

static_assert(kTile == 32, "a tile's document ids are loaded and reduced by one warp");

// The block's band (attention_block_band.h) and its document ids.
struct BlockMask {
  AttentionBand band;
  const std::int32_t* q_documents;  // null: one document
  const std::int32_t* k_documents;
  std::int64_t q_documents_stride, k_documents_stride;

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
  return m.band.contains(i, j) && (!m.has_documents() || q.ids[r] == k.ids[c]);
}

}  // namespace ustrain::cuda::tiles
