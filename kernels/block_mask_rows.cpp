#include "kernels/block_mask_rows.h"

#include <algorithm>
#include <string>

#include "kernels/error.h"

namespace ustrain {
namespace {

// Asserts that `docs` holds the ids of `count` rows from absolute position `first` of `batch` sequences.
void check_documents(const Tensor& docs, std::int64_t batch, std::int64_t first, std::int64_t count,
                     const char* what) {
  USTRAIN_ASSERT(!docs.empty(), std::string("attention mask: ") + what +
                                    " document ids are missing (set both q_documents and k_documents)");
  USTRAIN_ASSERT(docs.dtype == DType::i32 && docs.shape.rank() == 2 && docs.shape[0] == batch && first >= 0 &&
                     docs.shape[1] >= first + count,
                 std::string("attention mask: ") + what + " document ids " + docs.shape.str() + " for " +
                     std::to_string(batch) + " sequences do not cover positions " + std::to_string(first) + " .. " +
                     std::to_string(first + count - 1));
}

}  // namespace

BlockMaskRows::BlockMaskRows(const AttentionMask& mask, std::int64_t batch, std::int64_t nq, std::int64_t nk,
                             bool read_documents)
    : kind_(mask.kind), batch_(batch), nq_(nq), nk_(nk), window_(mask.window),
      window_shift_(mask.q_first - mask.k_first) {
  USTRAIN_ASSERT(mask.window >= 0, "attention mask: a negative window " + std::to_string(mask.window));
  // A causal block's order is positional (its ranges end together); a window's is absolute:
  // both must describe the same block.
  USTRAIN_ASSERT(kind_ != AttentionMask::Kind::causal || !mask.has_window() || window_shift_ == nk - nq,
                 "attention mask: a causal block of " + std::to_string(nq) + " queries against " + std::to_string(nk) +
                     " keys ends both ranges together, but its first positions " + std::to_string(mask.q_first) +
                     " and " + std::to_string(mask.k_first) + " do not");
  if (!mask.has_documents() || !read_documents || batch == 0 || nq == 0 || nk == 0) return;
  check_documents(mask.q_documents, batch, mask.q_first, nq, "query");
  check_documents(mask.k_documents, batch, mask.k_first, nk, "key");
  q_stride_ = mask.q_documents.shape[1];
  k_stride_ = mask.k_documents.shape[1];
  q_docs_ = mask.q_documents.i32() + mask.q_first;
  k_docs_ = mask.k_documents.i32() + mask.k_first;
  sorted_.resize(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int32_t* ids = k_docs_ + b * k_stride_;
    sorted_[static_cast<std::size_t>(b)] = std::is_sorted(ids, ids + nk) ? 1 : 0;
  }
}

KeyRange BlockMaskRows::geometric(std::int64_t r) const {
  KeyRange k{0, nk_};
  if (kind_ == AttentionMask::Kind::causal) k.end = std::clamp<std::int64_t>(r + 1 + nk_ - nq_, 0, nk_);
  if (window_ > 0) k.begin = std::clamp<std::int64_t>(r + window_shift_ - window_ + 1, 0, nk_);
  return k;
}

KeyRange BlockMaskRows::keys(std::int64_t b, std::int64_t r) const {
  KeyRange k = geometric(r);
  if (sorted_.empty() || k.empty() || !exact(b)) return k;
  const std::int32_t* ids = k_docs_ + b * k_stride_;
  const std::int32_t doc = q_docs_[b * q_stride_ + r];
  const auto [first, last] = std::equal_range(ids + k.begin, ids + k.end, doc);
  return {first - ids, last - ids};
}

KeyRange BlockMaskRows::tile_keys(std::int64_t b, std::int64_t r0, std::int64_t rows) const {
  KeyRange all{nk_, 0};
  for (std::int64_t r = r0; r < r0 + rows; ++r) {
    const KeyRange k = keys(b, r);
    if (k.empty()) continue;
    all.begin = std::min(all.begin, k.begin);
    all.end = std::max(all.end, k.end);
  }
  return all;
}

std::int64_t BlockMaskRows::part_rows(std::int64_t b, std::int64_t r0, std::int64_t rows) const {
  if (sorted_.empty() || !exact(b)) return rows;
  const std::int32_t* ids = q_docs_ + b * q_stride_;
  for (std::int64_t r = r0 + kMinPartRows; r < r0 + rows; ++r)
    if (ids[r] != ids[r - 1]) return r - r0;
  return rows;
}

std::int64_t BlockMaskRows::tiled_entries(std::int64_t tile) const {
  std::int64_t n = 0;
  for (std::int64_t b = 0; b < batch_; ++b)
    for (std::int64_t r0 = 0; r0 < nq_; r0 += tile) {
      const std::int64_t end = std::min(r0 + tile, nq_);
      for (std::int64_t r = r0, part = 0; r < end; r += part) {
        part = part_rows(b, r, end - r);
        n += part * tile_keys(b, r, part).size();
      }
    }
  return n;
}

}  // namespace ustrain
