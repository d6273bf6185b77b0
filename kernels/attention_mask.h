// Which keys each query of an attention sees: one value, chosen once by the attention
// sub-layer (core/model/attention.h), from which context parallelism's ring derives the mask
// of each block it computes (parallel/ring_attention.h). With i and j the absolute positions
// of a query and a key in their sequence, query i attends to key j iff
//   j <= i                when kind is causal (none: no order condition),
//   i - j < window        when a window is set (window > 0),
//   doc[i] == doc[j]      when document ids are set,
// every condition set holding at once.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace ustrain {

struct AttentionMask {
  enum class Kind : std::uint8_t { none, causal };

  Kind kind = Kind::none;
  // The sliding window W in tokens; 0 = none.
  std::int64_t window = 0;
  // The document of each query and key position, (B, n) i32 on the backend's device, indexed
  // by absolute position: column q_first + r is query row r's (n >= q_first + nq), so one
  // tensor of a whole window serves every block of it. Empty = every token in one document.
  Tensor q_documents, k_documents;
  // The absolute positions of the first query row and the first key row.
  std::int64_t q_first = 0, k_first = 0;

  static AttentionMask causal() { return with_kind(Kind::causal); }
  static AttentionMask none() { return with_kind(Kind::none); }
  static AttentionMask with_kind(Kind kind) {
    AttentionMask mask;
    mask.kind = kind;
    return mask;
  }
  bool has_window() const { return window > 0; }
  bool has_documents() const { return !q_documents.empty() || !k_documents.empty(); }
};

const char* mask_kind_name(AttentionMask::Kind kind);

// Refuses, as an internal error naming `op` and the field, a mask asking for more than a
// backend that implements the kind only does: a kind of none or causal, no window, no document ids.
void require_implemented_mask(const AttentionMask& mask, const char* op);

}  // namespace ustrain
