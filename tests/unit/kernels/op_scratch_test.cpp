// The op scratch the CUDA backend takes for each recorded op, worked out without a GPU from the
// recording (kernels/record/op_scratch.h) with the size functions the CUDA code asks with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/attention/attention_layout.h"
#include "kernels/cuda/scratch_sizes.h"
#include "kernels/record/op_scratch.h"
#include "kernels/record/recording_backend.h"
#include "tests/unit/kernels/whole_attention.h"

namespace ustrain {
namespace {

Tensor on(RecordingBackend& be, Shape shape, DType dtype) {
  return Tensor(be.allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype)), shape, dtype, Device::cuda);
}

TEST(OpScratch, EmbeddingBackwardTakesItsSortWorkspaceForEveryId) {
  RecordingBackend be(Device::cuda);
  const std::int64_t n = 4096, vocab = 1000, dim = 64;
  be.embedding_backward(on(be, {vocab, dim}, DType::f32), on(be, {8, 512}, DType::i32), on(be, {n, dim}, DType::bf16));
  const std::size_t bytes = cuda_op_scratch_bytes(be.ops().back());
  EXPECT_EQ(bytes, cuda::embedding_backward_scratch_bytes(n));
  // Four arrays of the ids and the sort's bound: 8 n for its own two arrays and 4 n of lookback.
  EXPECT_GE(bytes, 4 * n * 4 + 12 * n);
  EXPECT_EQ(cuda::embedding_backward_scratch_bytes(0), 0u);
}

TEST(OpScratch, RmsnormBackwardAndTheNormTakeTheirPartialSums) {
  RecordingBackend be(Device::cuda);
  const Tensor x = on(be, {4, 256, 512}, DType::bf16), w = on(be, {512}, DType::bf16);
  be.rmsnorm_backward(x, on(be, {512}, DType::f32), x, x, w, on(be, {1024}, DType::f32));
  // 1024 rows in 32 chunks of 32 rows (at most 64 chunks, at least 32 rows each).
  EXPECT_EQ(cuda_op_scratch_bytes(be.ops().back()), 32u * 512 * sizeof(double));
  be.sum_of_squares(on(be, {10}, DType::f32));
  EXPECT_EQ(cuda_op_scratch_bytes(be.ops().back()), 1024u * sizeof(double));
  be.linear_forward(on(be, {4, 8}, DType::bf16), on(be, {4, 16}, DType::bf16), on(be, {8, 16}, DType::bf16));
  EXPECT_EQ(cuda_op_scratch_bytes(be.ops().back()), 0u);
  EXPECT_FALSE(recorded_attention(be.ops().back()).has_value());
}

TEST(OpScratch, AttentionTakesTheLargerOfCudnnsStagingAndOurKernels) {
  const std::int64_t B = 2, S = 128, H = 4, Hkv = 2, Dh = 64;
  for (const DType act : {DType::bf16, DType::f32}) {
    RecordingBackend be(Device::cuda);
    const Tensor qkv = on(be, {B, S, (H + 2 * Hkv) * Dh}, act), out = on(be, {B, S, H * Dh}, act);
    const Tensor lse = on(be, {B, H, S}, DType::f32);
    test::whole_attention_forward(be, out, lse, qkv, H, Hkv);
    test::whole_attention_backward(be, qkv, out, qkv, out, lse, H, Hkv);
    const auto forward = recorded_attention(be.ops()[0]);
    const auto backward = recorded_attention(be.ops()[1]);
    ASSERT_TRUE(forward && backward);
    EXPECT_EQ(backward->whole.batch, B);
    EXPECT_EQ(backward->whole.seq, S);
    EXPECT_EQ(backward->whole.head_dim, Dh);
    EXPECT_EQ(backward->cudnn_offered, act == DType::bf16);
    const std::size_t ours = cuda::attention_backward_rows_bytes(B, H, S);  // one fp32 per (b, h, row)
    const std::size_t cudnn = cuda::backward_scratch(cuda::AttentionDims{B, S, H, Hkv, Dh}).bytes;
    EXPECT_EQ(cuda_op_scratch_bytes(be.ops()[0]), 0u) << dtype_name(act);  // forward: no staging
    EXPECT_EQ(cuda_op_scratch_bytes(be.ops()[1]), act == DType::bf16 ? std::max(ours, cudnn) : ours)
        << dtype_name(act);
  }
}

TEST(OpScratch, BlockAttentionStagesThroughScratchOnlyWhereCudnnMayRunIt) {
  const std::int64_t B = 1, Sq = 64, Skv = 128, H = 4, Hkv = 4, Dh = 32;
  RecordingBackend be(Device::cuda);
  const Tensor qkv = on(be, {B, Sq, (H + 2 * Hkv) * Dh}, DType::bf16), kv = on(be, {B, Skv, 2 * Hkv * Dh}, DType::bf16);
  const SeqRange q{16, 32}, k{0, 96};
  be.attention_block_forward(on(be, {B, 32, H * Dh}, DType::f32), on(be, {B, H, 32}, DType::f32), qkv, q, kv, k,
                             AttentionMask::none(), H, Hkv);
  const Tensor dq = on(be, {B, Sq, H * Dh}, DType::f32), dkv = on(be, {B, Skv, 2 * Hkv * Dh}, DType::f32);
  const Tensor lse = on(be, {B, H, Sq}, DType::f32);
  for (const DType out_dtype : {DType::bf16, DType::f32})
    be.attention_block_backward(dq, dkv, on(be, {B, Sq, H * Dh}, DType::bf16), qkv, q, kv, k,
                                on(be, {B, Sq, H * Dh}, out_dtype), lse, AttentionMask::none(), H, Hkv);
  be.attention_block_backward(dq, dkv, on(be, {B, Sq, H * Dh}, DType::bf16), qkv, q, kv, k,
                              on(be, {B, Sq, H * Dh}, DType::bf16), lse, AttentionMask::causal(), H, Hkv);
  const auto forward = recorded_attention(be.ops()[0]);
  ASSERT_TRUE(forward);
  const cuda::BlockAttentionDims d = forward->block_dims;
  EXPECT_EQ(d.q_rows, 32);
  EXPECT_EQ(d.kv_rows, 96);
  EXPECT_FALSE(d.causal);
  EXPECT_TRUE(recorded_attention(be.ops()[3])->block_dims.causal);
  EXPECT_EQ(cuda_op_scratch_bytes(be.ops()[0]), cuda::block_forward_scratch(d, 2).bytes);
  const std::size_t ours = cuda::attention_backward_rows_bytes(B, H, 32);
  EXPECT_EQ(cuda_op_scratch_bytes(be.ops()[1]), std::max(ours, cuda::block_backward_scratch(d, 2).bytes));
  // An fp32 merged out, or a causal block of unequal lengths: the backward runs our kernel only.
  for (const std::size_t i : {2, 3}) {
    EXPECT_FALSE(recorded_attention(be.ops()[i])->cudnn_offered) << i;
    EXPECT_EQ(cuda_op_scratch_bytes(be.ops()[i]), ours) << i;
  }
}

// The masks the CUDA backend hands cuDNN (a window on the causal diagonal) plan cuDNN's
// windowed graphs; document ids, and a window off the diagonal, run our kernels only.
TEST(OpScratch, AttentionFollowsTheMasksCudnnTakes) {
  const std::int64_t B = 2, S = 128, H = 4, Hkv = 2, Dh = 64, W = (H + 2 * Hkv) * Dh;
  RecordingBackend be(Device::cuda);
  const Tensor qkv = on(be, {B, S, W}, DType::bf16), out = on(be, {B, S, H * Dh}, DType::bf16);
  const Tensor lse = on(be, {B, H, S}, DType::f32);
  const SeqRange all{0, S};
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B * S), 0);
  AttentionMask windowed = AttentionMask::causal(), spanning = AttentionMask::causal(), documents = AttentionMask::causal();
  windowed.window = 32;
  spanning.window = S;
  documents.q_documents = documents.k_documents = Tensor(ids.data(), Shape{B, S}, DType::i32);
  for (const AttentionMask& mask : {windowed, spanning, documents})
    be.attention_block_backward(qkv, Tensor(), out, qkv, all, Tensor(), all, out, lse, mask, H, Hkv);
  const auto window = recorded_attention(be.ops()[0]), span = recorded_attention(be.ops()[1]);
  ASSERT_TRUE(window && span);
  EXPECT_TRUE(window->cudnn_offered);
  EXPECT_EQ(window->whole.window, 32);
  EXPECT_TRUE(span->cudnn_offered);
  EXPECT_EQ(span->whole.window, 0) << "a window spanning the sequence shares the plan without one";
  EXPECT_FALSE(recorded_attention(be.ops()[2])->cudnn_offered) << "documents run our kernel";
  EXPECT_EQ(cuda_op_scratch_bytes(be.ops()[2]), cuda::attention_backward_rows_bytes(B, H, S));

  // A packed block off the diagonal (positions differ) under a window: our kernel.
  const Tensor kv = on(be, {B, S, 2 * Hkv * Dh}, DType::bf16), dq = on(be, {B, S, H * Dh}, DType::f32);
  AttentionMask off = AttentionMask::none();
  off.window = 40;
  off.q_first = 64;
  be.attention_block_forward(on(be, {B, 32, H * Dh}, DType::f32), on(be, {B, H, 32}, DType::f32), qkv, {64, 32}, kv,
                             {0, 64}, off, H, Hkv);
  EXPECT_FALSE(recorded_attention(be.ops()[3])->cudnn_offered);
  EXPECT_EQ(cuda_op_scratch_bytes(be.ops()[3]), 0u);
}

}  // namespace
}  // namespace ustrain
