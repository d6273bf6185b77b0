// The device scratch each op of the CUDA backend takes, as pure functions of its shapes: the
// CUDA code asks its scratch with them, and the memory plan sizes the op-scratch arena with
// them without a GPU (kernels/record/op_scratch.h). Plain C++17, no CUDA headers.
//
// One figure is a bound rather than the exact size: the radix sort of embedding_backward.
// CUB's SortPairs of n (u32 key, i32 value) pairs into separate output arrays asks for
//   - the alternate key and value arrays of its passes: 8 n bytes;
//   - lookback counters, 256 of 4 bytes per tile: every tuning policy's onesweep tile holds
//     at least 256 items (256 or 384 threads of several items each), so at most 4 n + 1 KiB;
//   - per-pass digit histograms and counters, 4 passes of 256 4-byte bins per portion of
//     2^28 items (at most 8 portions for the 2^31 items a sort takes): at most 40 KiB;
//   - 256-byte alignment of its five parts.
// 12 n + 64 KiB covers it, and the CUDA code compares CUB's own figure with it at every call:
// more is an internal error, never an overrun.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ustrain::cuda {

inline constexpr std::size_t kScratchAlign = 256;

inline constexpr std::size_t round_up_scratch(std::size_t bytes) {
  return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// embedding_backward with n ids: keys in/out and positions in/out (n 4-byte values each),
// then the sort's storage, every part 256-byte aligned, plus the slack for aligning the base.
inline constexpr std::size_t embedding_sort_temp_bound(std::int64_t n) {
  return 12 * static_cast<std::size_t>(n) + (std::size_t{64} << 10);
}
inline constexpr std::size_t embedding_array_bytes(std::int64_t n) {
  return round_up_scratch(static_cast<std::size_t>(n) * 4);
}
inline constexpr std::size_t embedding_backward_scratch_bytes(std::int64_t n) {
  return n <= 0 ? 0 : kScratchAlign + 4 * embedding_array_bytes(n) + round_up_scratch(embedding_sort_temp_bound(n));
}

// rmsnorm_backward's dweight partial sums: one double per (row chunk, column), at most
// kRmsnormMaxChunks chunks of at least kRmsnormMinChunkRows rows.
inline constexpr std::int64_t kRmsnormMaxChunks = 64;
inline constexpr std::int64_t kRmsnormMinChunkRows = 32;
inline constexpr std::int64_t rmsnorm_chunk_rows(std::int64_t rows) {
  return std::max(kRmsnormMinChunkRows, (rows + kRmsnormMaxChunks - 1) / kRmsnormMaxChunks);
}
inline constexpr std::int64_t rmsnorm_chunks(std::int64_t rows) {
  const std::int64_t chunk_rows = rmsnorm_chunk_rows(rows);
  return (rows + chunk_rows - 1) / chunk_rows;
}
inline constexpr std::size_t rmsnorm_backward_scratch_bytes(std::int64_t rows, std::int64_t dim) {
  return rows <= 0 || dim <= 0 ? 0 : static_cast<std::size_t>(rmsnorm_chunks(rows) * dim) * sizeof(double);
}

// Our attention kernels' backward: one fp32 row statistic per (b, h, query row).
inline constexpr std::size_t attention_backward_rows_bytes(std::int64_t batch, std::int64_t heads,
                                                           std::int64_t q_rows) {
  return sizeof(float) * static_cast<std::size_t>(batch) * static_cast<std::size_t>(heads) *
         static_cast<std::size_t>(q_rows);
}

// sum_of_squares: one double partial sum per block of its fixed grid.
inline constexpr int kSumOfSquaresBlocks = 1024;
inline constexpr std::size_t sum_of_squares_scratch_bytes() { return sizeof(double) * kSumOfSquaresBlocks; }

}  // namespace ustrain::cuda
