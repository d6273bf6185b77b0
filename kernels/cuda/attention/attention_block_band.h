// The band of diagonals a block's mask leaves (AttentionBlock in attention_blocks.h, the
// conditions of kernels/attention_mask.h): which key rows each query row of the block may see
// under its causal order and window, and which query rows may see each key row. The kernels
// (attention_blocks.cu) bound their loops over tiles with it, so tiles outside the band are
// never touched; document ids narrow it further (attention_block_mask.cuh). Plain C++ that
// nvcc compiles for the device as well, so the arithmetic is unit-tested on any machine.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define USTRAIN_HOST_DEVICE __host__ __device__
#else
#define USTRAIN_HOST_DEVICE
#endif

namespace ustrain::cuda {

struct AttentionBand {
  std::int64_t nq = 0, nk = 0;    // the block's query and key rows
  bool causal = false;            // end-aligned: row i sees keys [0, i + 1 + nk - nq)
  std::int64_t window = 0;        // 0: none; else i - j + diagonal < window
  std::int64_t diagonal = 0;      // the absolute position of query row i minus key row i's

  // Query row i may see keys [key_begin(i), key_end(i)); both grow with i.
  USTRAIN_HOST_DEVICE std::int64_t key_begin(std::int64_t i) const {
    return window <= 0 ? 0 : clamp(i + diagonal - window + 1, nk);
  }
  USTRAIN_HOST_DEVICE std::int64_t key_end(std::int64_t i) const { return causal ? clamp(i + 1 + nk - nq, nk) : nk; }
  // Key j may be seen by query rows [first_query(j), query_end(j)); both grow with j.
  USTRAIN_HOST_DEVICE std::int64_t first_query(std::int64_t j) const { return causal ? clamp(j - (nk - nq), nq) : 0; }
  USTRAIN_HOST_DEVICE std::int64_t query_end(std::int64_t j) const {
    return window <= 0 ? nq : clamp(j - diagonal + window, nq);
  }
  USTRAIN_HOST_DEVICE bool contains(std::int64_t i, std::int64_t j) const {
    return j >= key_begin(i) && j < key_end(i);
  }

 private:
  USTRAIN_HOST_DEVICE static std::int64_t clamp(std::int64_t x, std::int64_t hi) { return x < 0 ? 0 : (x > hi ? hi : x); }
};

}  // namespace ustrain::cuda
