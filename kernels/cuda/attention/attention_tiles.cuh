// The tile machinery of the CUDA-core attention kernels (attention_blocks.cu): flash-attention
// style tiles of kTile query rows meeting tiles of kTile key rows in shared memory (fp32).
//
// Thread layout, shared by all kernels: 256 threads = kTile rows x kLanesPerRow lanes.
// A thread owns one row of its tile; for a score tile it computes the kTile / kLanesPerRow
// columns lane, lane + 8, ...; for a (row, head_dim) accumulator the columns
// lane, lane + 8, ... < head_dim. The lanes of a row are adjacent in one warp, so row-wise
// max and sum are three shuffles.
//
// The helpers take any geometry G with `head_dim` (the row width of a tile) and `ld` (its row
// stride in shared memory). Include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.h"

namespace ustrain::cuda::tiles {

constexpr int kTile = 32;  // query and key rows per tile
constexpr int kLanesPerRow = 8;
constexpr int kThreads = kTile * kLanesPerRow;
constexpr int kColsPerLane = kTile / kLanesPerRow;  // score columns per thread
constexpr int kScoreLd = kTile + 1;                 // row stride of a score tile: no bank conflicts
constexpr int kMaxHeadDim = 256;

// The row stride of a (kTile, head_dim) tile in shared memory: odd, so rows hit distinct banks.
inline int tile_ld(int head_dim) { return head_dim % 2 == 0 ? head_dim + 1 : head_dim; }

// tile (kTile, ld) = rows [row0, row0 + kTile) of src, head_dim wide, row stride `stride`
// elements; rows at or past `rows` read as zero.
template <class T, class G>
__device__ void load_tile(float* tile, const T* src, std::int64_t stride, std::int64_t row0, std::int64_t rows,
                          const G& g) {
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * g.head_dim; idx += kThreads) {
    const int r = idx / g.head_dim;
    const int d = idx - r * g.head_dim;
    const std::int64_t row = row0 + r;
    tile[r * g.ld + d] = row < rows ? to_float(src[row * stride + d]) : 0.0f;
  }
}

// values (kTile) = src[row0 + r] for the tile's rows, zero at or past `rows`.
inline __device__ void load_row_values(float* values, const float* src, std::int64_t row0, std::int64_t rows) {
  if (threadIdx.x < kTile) {
    const std::int64_t row = row0 + threadIdx.x;
    values[threadIdx.x] = row < rows ? src[row] : 0.0f;
  }
}

// Reductions over the kLanesPerRow lanes of one row (adjacent lanes of one warp).
__device__ __forceinline__ float row_max(float x) {
#pragma unroll
  for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float row_sum(float x) {
#pragma unroll
  for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// acc (this lane's columns of one row) += sum_c weights[c] * tile[c, :], over the kTile rows
// of tile (kTile, ld); weights: that row of a score tile.
template <int kAcc, class G>
__device__ __forceinline__ void add_weighted_rows(float (&acc)[kAcc], const float* weights, const float* tile,
                                                  int lane, const G& g) {
  for (int c = 0; c < kTile; ++c) {
    const float w = weights[c];
#pragma unroll
    for (int a = 0; a < kAcc; ++a) {
      const int d = lane + a * kLanesPerRow;
      if (d < g.head_dim) acc[a] += w * tile[c * g.ld + d];
    }
  }
}

// dst[d] = f(acc[a]) rounded to T, for this lane's columns d = lane + a * kLanesPerRow < head_dim.
template <class T, int kAcc, class G, class F>
__device__ __forceinline__ void store_row(T* dst, const float (&acc)[kAcc], int lane, const G& g, F f) {
#pragma unroll
  for (int a = 0; a < kAcc; ++a) {
    const int d = lane + a * kLanesPerRow;
    if (d < g.head_dim) dst[d] = from_float<T>(f(acc[a]));
  }
}

// Dynamic shared memory of the three kernel shapes, for tiles of row stride ld:
//   forward  q, k, v tiles and a score tile;
//   dq       k, v, q, dout tiles, a score tile, lse and delta of the query rows;
//   dk, dv   the same and a second score tile (attention_block_backward.cu's BackwardTiles).
inline std::size_t forward_smem_bytes(int ld) {
  return sizeof(float) * (3 * std::size_t{kTile} * ld + std::size_t{kTile} * kScoreLd);
}
inline std::size_t dq_smem_bytes(int ld) {
  return sizeof(float) * (4 * std::size_t{kTile} * ld + std::size_t{kTile} * kScoreLd + 2 * kTile);
}
inline std::size_t dkv_smem_bytes(int ld) {
  return sizeof(float) * (4 * std::size_t{kTile} * ld + 2 * std::size_t{kTile} * kScoreLd + 2 * kTile);
}

// Kernels above 48 KiB of dynamic shared memory must opt in, up to the device's limit.
template <class Kernel>
void allow_shared_memory(Kernel kernel, std::size_t bytes, int head_dim, const char* op) {
  int device = 0;
  int limit = 0;
  USTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  USTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  USTRAIN_ASSERT(bytes <= static_cast<std::size_t>(limit),
                 std::string(op) + ": head_dim " + std::to_string(head_dim) + " needs " + std::to_string(bytes) +
                     " bytes of shared memory per block, the device allows " + std::to_string(limit));
  const int requested = static_cast<int>(bytes);
  USTRAIN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, requested));
}

inline unsigned tile_count(std::int64_t rows) { return static_cast<unsigned>((rows + kTile - 1) / kTile); }

template <class T, int kDh>
struct Kind {
  using type = T;
  static constexpr int head_dim_bound = kDh;
};

// Calls f(Kind<T, kDh>{}) for the element type T of `act` and the smallest bound kDh >= head_dim.
template <class F>
void with_kind(DType act, int head_dim, const char* op, F&& f) {
  with_float_type(
      act,
      [&](auto t) {
        using T = decltype(t);
        if (head_dim <= 64)
          f(Kind<T, 64>{});
        else if (head_dim <= 128)
          f(Kind<T, 128>{});
        else
          f(Kind<T, kMaxHeadDim>{});
      },
      [act, op] { return std::string(op) + ": unsupported dtype " + dtype_name(act); });
}

}  // namespace ustrain::cuda::tiles
