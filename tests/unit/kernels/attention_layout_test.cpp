// The strided views through which cuDNN reads and writes the fused attention buffers: each
// must address exactly the elements the CPU reference uses, and together cover each buffer once.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/attention/attention_layout.h"

namespace ustrain::cuda {
namespace {

const AttentionDims kCases[] = {
    {1, 2, 1, 1, 8}, {2, 5, 4, 2, 8}, {3, 7, 6, 3, 16}, {2, 9, 8, 1, 64}, {1, 4, 4, 4, 128}};

// Marks every element a view touches; the view must stay inside the buffer.
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

TEST(AttentionLayout, QkvViewsMatchTheFusedRowLayout) {
  for (const AttentionDims& a : kCases) {
    const std::int64_t S = a.seq, W = a.qkv_width(), Dh = a.head_dim;
    const StridedView q = query_view(a), k = key_view(a), v = value_view(a);
    EXPECT_EQ(q.dims, (std::array<std::int64_t, 4>{a.batch, a.heads, S, Dh}));
    EXPECT_EQ(k.dims, (std::array<std::int64_t, 4>{a.batch, a.kv_heads, S, Dh}));
    EXPECT_EQ(v.dims, k.dims);
    for (std::int64_t b = 0; b < a.batch; ++b)
      for (std::int64_t s = 0; s < S; ++s)
        for (std::int64_t d = 0; d < Dh; ++d) {
          const std::int64_t row = (b * S + s) * W;
          for (std::int64_t h = 0; h < a.heads; ++h) EXPECT_EQ(q.element(b, h, s, d), row + h * Dh + d);
          for (std::int64_t h = 0; h < a.kv_heads; ++h) {
            EXPECT_EQ(k.element(b, h, s, d), row + (a.heads + h) * Dh + d);
            EXPECT_EQ(v.element(b, h, s, d), row + (a.heads + a.kv_heads + h) * Dh + d);
          }
        }
  }
}

TEST(AttentionLayout, QkvViewsCoverTheBufferExactlyOnce) {
  for (const AttentionDims& a : kCases) {
    std::vector<int> hits(static_cast<std::size_t>(a.batch * a.seq * a.qkv_width()), 0);
    cover(hits, query_view(a));
    cover(hits, key_view(a));
    cover(hits, value_view(a));
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

TEST(AttentionLayout, OutputAndStatsViewsMatchTheirBuffers) {
  for (const AttentionDims& a : kCases) {
    const StridedView o = output_view(a), st = stats_view(a);
    EXPECT_EQ(st.dims, (std::array<std::int64_t, 4>{a.batch, a.heads, a.seq, 1}));
    for (std::int64_t b = 0; b < a.batch; ++b)
      for (std::int64_t h = 0; h < a.heads; ++h)
        for (std::int64_t s = 0; s < a.seq; ++s) {
          EXPECT_EQ(st.element(b, h, s, 0), (b * a.heads + h) * a.seq + s);  // lse (B, H, S)
          for (std::int64_t d = 0; d < a.head_dim; ++d)
            EXPECT_EQ(o.element(b, h, s, d), (b * a.seq + s) * a.out_width() + h * a.head_dim + d);
        }
    std::vector<int> out_hits(static_cast<std::size_t>(a.batch * a.seq * a.out_width()), 0);
    cover(out_hits, o);
    for (int h : out_hits) ASSERT_EQ(h, 1);
    std::vector<int> lse_hits(static_cast<std::size_t>(a.batch * a.heads * a.seq), 0);
    cover(lse_hits, st);
    for (int h : lse_hits) ASSERT_EQ(h, 1);
  }
}

TEST(AttentionLayout, TransposedKeyAddressesTheSameElements) {
  const AttentionDims a{2, 5, 4, 2, 8};
  const StridedView k = key_view(a), kt = transposed(k);
  EXPECT_EQ(kt.dims, (std::array<std::int64_t, 4>{2, 2, 8, 5}));
  EXPECT_EQ(kt.offset, k.offset);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t s = 0; s < 5; ++s)
        for (std::int64_t d = 0; d < 8; ++d) EXPECT_EQ(kt.element(b, h, d, s), k.element(b, h, s, d));
}

TEST(AttentionLayout, EveryViewStartsOnA16ByteBoundaryInHalfPrecision) {
  // cuDNN is told every tensor is 16-byte aligned; with 2-byte elements, offsets and the
  // row stride must be multiples of 8 elements whenever cudnn_supports says yes.
  for (const AttentionDims& a : kCases) {
    ASSERT_TRUE(cudnn_supports(a, DType::bf16));
    for (const StridedView& v : {query_view(a), key_view(a), value_view(a), output_view(a)}) {
      EXPECT_EQ(v.offset % 8, 0);
      EXPECT_EQ(v.strides[2] % 8, 0);
      EXPECT_EQ(v.strides[1] % 8, 0);
    }
  }
}

TEST(AttentionLayout, BackwardScratchRegionsAreAlignedAndDisjoint) {
  for (const AttentionDims& a : kCases) {
    const BackwardScratch s = backward_scratch(a);
    const auto rows = static_cast<std::size_t>(a.batch * a.heads * a.seq);
    EXPECT_EQ(s.dq_accum_offset, 0u);
    EXPECT_GE(s.row_dot_offset, rows * static_cast<std::size_t>(a.head_dim) * sizeof(float));
    EXPECT_GE(s.bytes, s.row_dot_offset + rows * sizeof(float));
    EXPECT_EQ(s.row_dot_offset % kScratchAlignment, 0u);
    EXPECT_EQ(s.bytes % kScratchAlignment, 0u);
    EXPECT_LT(s.bytes, s.row_dot_offset + rows * sizeof(float) + kScratchAlignment);
    EXPECT_EQ(dq_accum_view(a).numel(), static_cast<std::int64_t>(rows) * a.head_dim);
    EXPECT_EQ(row_dot_view(a).strides, (std::array<std::int64_t, 4>{a.heads * a.seq, a.seq, 1, 1}));
  }
}

TEST(AttentionLayout, CudnnSupportsHalfPrecisionGroupedShapesOnly) {
  const AttentionDims ok{2, 16, 8, 2, 64};
  EXPECT_TRUE(cudnn_supports(ok, DType::bf16));
  EXPECT_TRUE(cudnn_supports(ok, DType::f16));
  EXPECT_FALSE(cudnn_supports(ok, DType::f32));

  auto with = [ok](auto change) {
    AttentionDims a = ok;
    change(a);
    return cudnn_supports(a, DType::bf16);
  };
  EXPECT_TRUE(with([](AttentionDims& a) { a.head_dim = 8; }));
  EXPECT_TRUE(with([](AttentionDims& a) { a.head_dim = 128; }));
  EXPECT_FALSE(with([](AttentionDims& a) { a.head_dim = 60; }));
  EXPECT_FALSE(with([](AttentionDims& a) { a.head_dim = 136; }));
  EXPECT_FALSE(with([](AttentionDims& a) { a.head_dim = 0; }));
  EXPECT_FALSE(with([](AttentionDims& a) { a.kv_heads = 3; }));
  EXPECT_FALSE(with([](AttentionDims& a) { a.kv_heads = 0; }));
  EXPECT_TRUE(with([](AttentionDims& a) { a.kv_heads = 1; }));
  EXPECT_TRUE(with([](AttentionDims& a) { a.kv_heads = 8; }));
  EXPECT_FALSE(with([](AttentionDims& a) { a.seq = 1; }));
  EXPECT_FALSE(with([](AttentionDims& a) { a.batch = 0; }));
}

TEST(AttentionLayout, CudnnUnsupportedReasonSaysWhy) {
  const AttentionDims ok{2, 16, 8, 2, 64};
  EXPECT_EQ(cudnn_unsupported_reason(ok, DType::bf16), "");
  EXPECT_EQ(cudnn_unsupported_reason(ok, DType::f32), "fused attention is bf16/f16 only");
  AttentionDims odd = ok;
  odd.head_dim = 60;
  EXPECT_EQ(cudnn_unsupported_reason(odd, DType::f16), "head_dim is not a multiple of 8");
  odd.head_dim = 256;
  EXPECT_EQ(cudnn_unsupported_reason(odd, DType::bf16), "head_dim is above 128");
  odd = ok;
  odd.kv_heads = 3;
  EXPECT_EQ(cudnn_unsupported_reason(odd, DType::bf16), "query heads are not a whole multiple of the kv heads");
  odd = ok;
  odd.seq = 1;
  EXPECT_EQ(cudnn_unsupported_reason(odd, DType::bf16), "needs at least one sequence of two or more tokens");
}

}  // namespace
}  // namespace ustrain::cuda
