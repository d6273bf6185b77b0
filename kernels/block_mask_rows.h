// The keys each query row of an attention block sees under its mask (kernels/attention_mask.h),
// as one range of key rows per query row: what lets a kernel skip the work the mask forbids,
// and what the recording backend prices a masked block by.
//
// Within a block of nq query rows against nk key rows:
//   causal   row r sees keys up to r + nk - nq (the ranges end at the same position);
//   window   row r sees keys from q_first + r - W + 1 - k_first on (absolute positions);
//   documents row r sees the keys of its document, column q_first + r of q_documents against
//            columns k_first .. k_first + nk - 1 of k_documents (document ids are indexed by
//            absolute position, so one tensor of a whole window serves every block of it).
// Document ids along a packed window are non-decreasing, so a document's keys form one run,
// found by binary search. Where a batch row's key ids are not sorted the run is only a bound
// and same_document() decides each key.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_mask.h"

namespace ustrain {

// The query rows the CPU kernel computes at once: a tile's keys are the union of its rows'
// ranges, so this is also the granularity at which the recording backend counts the work.
inline constexpr std::int64_t kAttentionQueryTile = 64;
inline constexpr std::int64_t kMinPartRows = 16;

struct KeyRange {
  std::int64_t begin = 0, end = 0;
  bool empty() const { return end <= begin; }
  std::int64_t size() const { return empty() ? 0 : end - begin; }
};

class BlockMaskRows {
 public:
  // For a block of `nq` query rows against `nk` key rows of `batch` sequences. The document ids
  // are read from host memory; with `read_documents` false they are ignored (one document).
  BlockMaskRows(const AttentionMask& mask, std::int64_t batch, std::int64_t nq, std::int64_t nk,
                bool read_documents = true);

  // The key rows query row r of batch row b may see; every key in it is allowed when
  // exact(b), else same_document() decides.
  KeyRange keys(std::int64_t b, std::int64_t r) const;
  bool exact(std::int64_t b) const { return sorted_.empty() || sorted_[static_cast<std::size_t>(b)] != 0; }
  bool same_document(std::int64_t b, std::int64_t r, std::int64_t c) const {
    return q_docs_[b * q_stride_ + r] == k_docs_[b * k_stride_ + c];
  }
  // The keys of rows [r0, r0 + rows): the union of their ranges (empty when every row's is).
  KeyRange tile_keys(std::int64_t b, std::int64_t r0, std::int64_t rows) const;
  // How many of rows [r0, r0 + rows) to compute together: up to the first document start after
  // kMinPartRows of them, so that a tile scores few queries against another document's keys
  // (and documents of a few tokens still share one product).
  std::int64_t part_rows(std::int64_t b, std::int64_t r0, std::int64_t rows) const;
  // Score entries a kernel computes in tiles of `tile` rows, each in parts (part_rows): rows
  // times the part's keys, summed over the parts of every batch row.
  std::int64_t tiled_entries(std::int64_t tile) const;

 private:
  KeyRange geometric(std::int64_t r) const;

  AttentionMask::Kind kind_;
  std::int64_t batch_, nq_, nk_, window_, window_shift_;
  const std::int32_t* q_docs_ = nullptr;  // of query row 0 of batch row 0
  const std::int32_t* k_docs_ = nullptr;  // of key row 0 of batch row 0
  std::int64_t q_stride_ = 0, k_stride_ = 0;
  std::vector<char> sorted_;  // per batch row: key ids non-decreasing (empty: no documents)
};

}  // namespace ustrain
