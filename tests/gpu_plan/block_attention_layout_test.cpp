// The strided views through which cuDNN reads and writes one block of attention over blocks
// of the sequence (attention_layout.h): from the pointers the backend advances to the block's
// first rows, each must address exactly the elements the CPU reference uses
// (kernels/cpu/cpu_attention.cpp), and the block's own outputs must cover their
// buffers once.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/attention/attention_layout.h"

namespace ustrain::cuda {
namespace {

struct Case {
  BlockAttentionDims dims;
  std::int64_t q_begin, k_begin;
};

// (B, Sq, Skv, q rows, kv rows, H, Hkv, Dh, causal) and where the block starts.
const Case kCases[] = {{{2, 9, 7, 4, 3, 4, 2, 8, false}, 5, 2},
                       {{1, 6, 10, 6, 10, 3, 1, 16, false}, 0, 0},
                       {{3, 8, 8, 2, 2, 2, 2, 8, true}, 3, 6}};

void cover(std::vector<int>& hits, const StridedView& v) {
  for (std::int64_t i0 = 0; i0 < v.dims[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < v.dims[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < v.dims[2]; ++i2)
        for (std::int64_t i3 = 0; i3 < v.dims[3]; ++i3) {
          const std::int64_t e = v.element(i0, i1, i2, i3);
          ASSERT_GE(e, 0);
          ASSERT_LT(e, static_cast<std::int64_t>(hits.size()));
          ++hits[static_cast<std::size_t>(e)];
        }
}

TEST(BlockAttentionLayout, InputViewsAddressTheBlockRows) {
  for (const auto& [a, q0, k0] : kCases) {
    const std::int64_t W = a.qkv_width(), KW = a.kv_width(), OW = a.out_width(), Dh = a.head_dim;
    const StridedView q = block_query_view(a), k = block_key_view(a), v = block_value_view(a);
    const StridedView o = block_merged_output_view(a);
    const std::int64_t q_start = q0 * W, k_start = k0 * KW, o_start = q0 * OW;  // the advanced pointers
    for (std::int64_t b = 0; b < a.batch; ++b)
      for (std::int64_t d = 0; d < Dh; ++d) {
        for (std::int64_t r = 0; r < a.q_rows; ++r)
          for (std::int64_t h = 0; h < a.heads; ++h) {
            EXPECT_EQ(q_start + q.element(b, h, r, d), (b * a.q_seq + q0 + r) * W + h * Dh + d);
            EXPECT_EQ(o_start + o.element(b, h, r, d), (b * a.q_seq + q0 + r) * OW + h * Dh + d);
          }
        for (std::int64_t r = 0; r < a.kv_rows; ++r)
          for (std::int64_t g = 0; g < a.kv_heads; ++g) {
            EXPECT_EQ(k_start + k.element(b, g, r, d), (b * a.kv_seq + k0 + r) * KW + g * Dh + d);
            EXPECT_EQ(k_start + v.element(b, g, r, d), (b * a.kv_seq + k0 + r) * KW + (a.kv_heads + g) * Dh + d);
          }
      }
  }
}

TEST(BlockAttentionLayout, OwnOutputsCoverTheirBuffersOnce) {
  for (const auto& [a, q0, k0] : kCases) {
    std::vector<int> out(static_cast<std::size_t>(a.batch * a.q_rows * a.out_width()), 0);
    cover(out, block_output_view(a));  // O and dQ: (B, q rows, H Dh)
    for (int h : out) ASSERT_EQ(h, 1);
    std::vector<int> dkv(static_cast<std::size_t>(a.batch * a.kv_rows * a.kv_width()), 0);
    cover(dkv, block_key_grad_view(a));
    cover(dkv, block_value_grad_view(a));
    for (int h : dkv) ASSERT_EQ(h, 1);
    // lse (B, H, q rows) as the CPU indexes it.
    const StridedView s = block_stats_view(a);
    for (std::int64_t b = 0; b < a.batch; ++b)
      for (std::int64_t h = 0; h < a.heads; ++h)
        for (std::int64_t r = 0; r < a.q_rows; ++r) EXPECT_EQ(s.element(b, h, r, 0), (b * a.heads + h) * a.q_rows + r);
  }
}

TEST(BlockAttentionLayout, BackwardScratchRegionsAreAlignedAndApart) {
  for (const auto& [a, q0, k0] : kCases) {
    const BlockScratch s = block_backward_scratch(a, 2);
    const std::size_t rows = static_cast<std::size_t>(a.batch * a.heads * a.q_rows);
    const std::size_t starts[] = {s.dq_accum_offset, s.row_dot_offset, s.lse_offset, s.dq_offset, s.dkv_offset};
    const std::size_t sizes[] = {rows * static_cast<std::size_t>(a.head_dim) * 4, rows * 4, rows * 4,
                                 static_cast<std::size_t>(a.batch * a.q_rows * a.out_width()) * 2,
                                 static_cast<std::size_t>(a.batch * a.kv_rows * a.kv_width()) * 2};
    for (std::size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(starts[i] % kScratchAlignment, 0u);
      EXPECT_LE(starts[i] + sizes[i], i + 1 < 5 ? starts[i + 1] : s.bytes);
    }
    EXPECT_GE(block_forward_scratch(a, 2).bytes, static_cast<std::size_t>(a.batch * a.q_rows * a.out_width()) * 2);
  }
}

}  // namespace
}  // namespace ustrain::cuda
