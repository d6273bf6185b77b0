// The CUDA ops of attention over blocks of the sequence against the CPU reference, op by op
// (kv pack, block forward, merge, block backward, grad pack) for query and key blocks of
// different lengths, masks none and causal (end-aligned), MHA, GQA and MQA; and composed:
// blocks merged over a split sequence equal the whole-sequence attention.
//
// Tolerances (gpu_test_support.h): lse and the merge are fp32 arithmetic on the same inputs
// as the reference, held to the fp32 bound whatever act is; the block results and the
// gradient sums are fp32, but where cuDNN runs a block (bf16, f16: cudnn_block_supports) they
// pass through act (its O, dQ, dK, dV), so they get act's bound; kv pack and grad pack move or
// round values and must match bit for bit; dqkv of the composed check is in act and its
// backward reads the merged out rounded to act, so it gets act's bound too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_attention_support.h"
#include "gpu_test_support.h"
#include "kernels/cuda/attention/attention_layout.h"
#include "tests/unit/kernels/whole_attention.h"

namespace ustrain::gpu_test {
namespace {

class GpuAttentionBlocksTest : public GpuActTest {};

// ---- op by op ----

struct BlockCase {
  std::int64_t batch, q_seq, kv_seq, heads, kv_heads, head_dim;
  SeqRange q, k;
  AttentionMask mask;
  std::int64_t width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::int64_t kv_width() const { return 2 * kv_heads * head_dim; }
  std::int64_t out_width() const { return heads * head_dim; }
  std::string str() const {
    return "B=" + std::to_string(batch) + " H=" + std::to_string(heads) + " Hkv=" + std::to_string(kv_heads) +
           " Dh=" + std::to_string(head_dim) + " q=[" + std::to_string(q.begin) + "+" + std::to_string(q.count) +
           " of " + std::to_string(q_seq) + "] k=[" + std::to_string(k.begin) + "+" + std::to_string(k.count) +
           " of " + std::to_string(kv_seq) + "] " + (mask.kind == AttentionMask::Kind::causal ? "causal" : "none");
  }
  cuda::BlockAttentionDims cudnn_dims() const {
    return {batch, q_seq, kv_seq, q.count, k.count, heads, kv_heads, head_dim, mask.kind == AttentionMask::Kind::causal};
  }
};
const AttentionMask kNone = AttentionMask::none();
const AttentionMask kCausal = AttentionMask::causal();
// GQA with more queries than keys (the first rows see no key under causal) and the reverse,
// MHA with more keys than queries, MQA, equal blocks at Dh 128, an odd head size with a short
// key block, the largest head size, and a block without keys.
const BlockCase kBlockCases[] = {
    {2, 70, 45, 8, 2, 64, {5, 40}, {3, 37}, kCausal},  {2, 70, 45, 8, 2, 64, {5, 40}, {3, 37}, kNone},
    {1, 100, 130, 4, 4, 40, {10, 33}, {0, 130}, kCausal}, {3, 9, 20, 6, 1, 16, {0, 9}, {4, 16}, kNone},
    {3, 9, 20, 6, 1, 16, {2, 7}, {4, 16}, kCausal},    {2, 64, 64, 4, 2, 128, {0, 64}, {0, 64}, kCausal},
    {1, 50, 50, 2, 1, 12, {20, 30}, {40, 10}, kCausal}, {1, 40, 33, 2, 1, 256, {8, 32}, {1, 31}, kCausal},
    {2, 12, 8, 4, 2, 16, {0, 12}, {8, 0}, kNone},
};

TEST_P(GpuAttentionBlocksTest, KvPackMatchesCpuBitForBit) {
  for (const auto& c : kBlockCases) {
    const Shape qs{c.batch, c.q_seq, c.width()}, ks{c.batch, c.q_seq, c.kv_width()};
    const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
    auto qkv = random_values(static_cast<std::size_t>(qs.numel()), 50, act());
    std::vector<float> kv(static_cast<std::size_t>(ks.numel()));
    cpu().attention_kv_pack(host(kv, ks), host(qkv, qs), h, hkv);

    auto gqkv = on_device(gpu(), qkv, qs, act());
    DeviceTensor gkv(gpu(), ks, act());
    gpu().attention_kv_pack(gkv, *gqkv, h, hkv);
    EXPECT_TRUE(same_bits(gkv.download(), kv)) << "kv pack " << c.str();
  }
}

TEST_P(GpuAttentionBlocksTest, BlockForwardMatchesCpu) {
  for (const auto& c : kBlockCases) {
    const Shape qs{c.batch, c.q_seq, c.width()}, ks{c.batch, c.kv_seq, c.kv_width()};
    const Shape os{c.batch, c.q.count, c.out_width()}, ls{c.batch, c.heads, c.q.count};
    const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
    // Inputs in [-2, 2] make the softmax peaked enough that a wrong scale or mask shows.
    auto qkv = random_values(static_cast<std::size_t>(qs.numel()), 51, act(), -2.0f, 2.0f);
    auto kv = random_values(static_cast<std::size_t>(ks.numel()), 52, act(), -2.0f, 2.0f);
    std::vector<float> out(static_cast<std::size_t>(os.numel())), lse(static_cast<std::size_t>(ls.numel()));
    cpu().attention_block_forward(host(out, os), host(lse, ls), host(qkv, qs), c.q, host(kv, ks), c.k, c.mask, h, hkv);

    auto gqkv = on_device(gpu(), qkv, qs, act()), gkv = on_device(gpu(), kv, ks, act());
    DeviceTensor gout(gpu(), os, DType::f32), glse(gpu(), ls, DType::f32);
    gpu().fill(gout, 1234.0f);  // overwritten
    gpu().fill(glse, 1234.0f);
    gpu().attention_block_forward(gout, glse, *gqkv, c.q, *gkv, c.k, c.mask, h, hkv);
    expect_close(gout.download(), out, act_tolerance(act(), Measure::norm_rel), "block out " + c.str());
    expect_lse_close(glse.download(), lse, "block lse " + c.str());
  }
}

TEST_P(GpuAttentionBlocksTest, MergeMatchesCpu) {
  const std::int64_t B = 2, S = 50, H = 4, Dh = 24;
  const SeqRange q{7, 30};
  const Shape as{B, S, H * Dh}, ls{B, H, S}, bos{B, q.count, H * Dh}, bls{B, H, q.count};
  auto acc = random_values(static_cast<std::size_t>(as.numel()), 60, DType::f32);
  auto lse = random_values(static_cast<std::size_t>(ls.numel()), 61, DType::f32, -3.0f, 3.0f);
  auto block_out = random_values(static_cast<std::size_t>(bos.numel()), 62, DType::f32);
  auto block_lse = random_values(static_cast<std::size_t>(bls.numel()), 63, DType::f32, -3.0f, 3.0f);
  // Rows without a result so far, blocks without keys for a row, and both.
  for (std::size_t i = 0; i < lse.size(); i += 5) lse[i] = kNegInf;
  for (std::size_t i = 0; i < block_lse.size(); i += 7) block_lse[i] = kNegInf;

  auto gacc = on_device(gpu(), acc, as, DType::f32), glse = on_device(gpu(), lse, ls, DType::f32);
  auto gbo = on_device(gpu(), block_out, bos, DType::f32), gbl = on_device(gpu(), block_lse, bls, DType::f32);
  cpu().attention_merge(host(acc, as), host(lse, ls), host(block_out, bos), host(block_lse, bls), q);
  gpu().attention_merge(*gacc, *glse, *gbo, *gbl, q);
  expect_close(gacc->download(), acc, fp32_tolerance(Measure::max_rel), "merged acc");
  expect_lse_close(glse->download(), lse, "merged lse");
}

TEST_P(GpuAttentionBlocksTest, BlockBackwardAccumulatesLikeCpu) {
  for (const auto& c : kBlockCases) {
    const Shape qs{c.batch, c.q_seq, c.width()}, ks{c.batch, c.kv_seq, c.kv_width()};
    const Shape os{c.batch, c.q_seq, c.out_width()}, ls{c.batch, c.heads, c.q_seq};
    const Shape bos{c.batch, c.q.count, c.out_width()}, bls{c.batch, c.heads, c.q.count};
    const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
    auto qkv = random_values(static_cast<std::size_t>(qs.numel()), 70, act(), -2.0f, 2.0f);
    auto kv = random_values(static_cast<std::size_t>(ks.numel()), 71, act(), -2.0f, 2.0f);
    auto dout = random_values(static_cast<std::size_t>(os.numel()), 72, act());
    // The result of all of qkv's queries: this block's own, in its rows (what a merge of this
    // block alone gives).
    std::vector<float> block_out(static_cast<std::size_t>(bos.numel())), block_lse(static_cast<std::size_t>(bls.numel()));
    cpu().attention_block_forward(host(block_out, bos), host(block_lse, bls), host(qkv, qs), c.q, host(kv, ks), c.k,
                                  c.mask, h, hkv);
    std::vector<float> out(static_cast<std::size_t>(os.numel()), 0.0f), lse(static_cast<std::size_t>(ls.numel()), 0.0f);
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t r = 0; r < c.q.count; ++r) {
        for (std::int64_t d = 0; d < c.out_width(); ++d)
          out[static_cast<std::size_t>((b * c.q_seq + c.q.begin + r) * c.out_width() + d)] =
              block_out[static_cast<std::size_t>((b * c.q.count + r) * c.out_width() + d)];
        for (std::int64_t hh = 0; hh < c.heads; ++hh)
          lse[static_cast<std::size_t>((b * c.heads + hh) * c.q_seq + c.q.begin + r)] =
              block_lse[static_cast<std::size_t>((b * c.heads + hh) * c.q.count + r)];
      }
    // The model passes the merged out in act (or keeps it fp32): both, the CPU seeing the same values.
    for (DType out_type : {act(), DType::f32}) {
      auto out_values = rounded(out, out_type);
      // The sums accumulate: prefilled, small, so that the increments dominate their norm.
      const auto dq0 = random_values(static_cast<std::size_t>(os.numel()), 73, DType::f32, -0.1f, 0.1f);
      const auto dkv0 = random_values(static_cast<std::size_t>(ks.numel()), 74, DType::f32, -0.1f, 0.1f);
      auto dq = dq0, dkv = dkv0;
      cpu().attention_block_backward(host(dq, os), host(dkv, ks), host(dout, os), host(qkv, qs), c.q, host(kv, ks), c.k,
                                     host(out_values, os), host(lse, ls), c.mask, h, hkv);

      auto gqkv = on_device(gpu(), qkv, qs, act()), gkv = on_device(gpu(), kv, ks, act());
      auto gdout = on_device(gpu(), dout, os, act()), gout = on_device(gpu(), out_values, os, out_type);
      auto glse = on_device(gpu(), lse, ls, DType::f32);
      auto gdq = on_device(gpu(), dq0, os, DType::f32), gdkv = on_device(gpu(), dkv0, ks, DType::f32);
      gpu().attention_block_backward(*gdq, *gdkv, *gdout, *gqkv, c.q, *gkv, c.k, *gout, *glse, c.mask, h, hkv);
      const auto got_dq = gdq->download(), got_dkv = gdkv->download();

      const std::string at = c.str() + " out " + dtype_name(out_type);
      const std::int64_t OW = c.out_width(), KW = c.kv_width(), half = KW / 2;
      EXPECT_TRUE(same_bits(outside(got_dq, c.batch, c.q_seq, OW, c.q), outside(dq0, c.batch, c.q_seq, OW, c.q)))
          << "dq rows outside the block changed, " << at;
      EXPECT_TRUE(same_bits(outside(got_dkv, c.batch, c.kv_seq, KW, c.k), outside(dkv0, c.batch, c.kv_seq, KW, c.k)))
          << "dkv rows outside the block changed, " << at;
      if (c.k.count > 0) {
        const auto tol = act_tolerance(act(), Measure::norm_rel);
        expect_close(part(minus(got_dq, dq0), c.batch, c.q_seq, OW, c.q, 0, OW),
                     part(minus(dq, dq0), c.batch, c.q_seq, OW, c.q, 0, OW), tol, "block dq " + at);
        expect_close(part(minus(got_dkv, dkv0), c.batch, c.kv_seq, KW, c.k, 0, half),
                     part(minus(dkv, dkv0), c.batch, c.kv_seq, KW, c.k, 0, half), tol, "block dk " + at);
        expect_close(part(minus(got_dkv, dkv0), c.batch, c.kv_seq, KW, c.k, half, half),
                     part(minus(dkv, dkv0), c.batch, c.kv_seq, KW, c.k, half, half), tol, "block dv " + at);
      }

      // Our kernel is deterministic: the same call again adds the same increments, bit for bit
      // (cuDNN's backward need not be).
      if (out_type == act() && cuda::cudnn_block_supports(c.cudnn_dims(), act())) continue;
      gdq->upload(dq0);
      gdkv->upload(dkv0);
      gpu().attention_block_backward(*gdq, *gdkv, *gdout, *gqkv, c.q, *gkv, c.k, *gout, *glse, c.mask, h, hkv);
      EXPECT_TRUE(same_bits(gdq->download(), got_dq) && same_bits(gdkv->download(), got_dkv))
          << "block backward is not deterministic, " << at;
      if (act() == DType::f32) break;  // one out dtype
    }
  }
}

TEST_P(GpuAttentionBlocksTest, GradPackRoundsLikeCpuBitForBit) {
  const std::int64_t B = 3, S = 17, QW = 96, KW = 48;
  const Shape qs{B, S, QW}, ks{B, S, KW}, ds{B, S, QW + KW};
  auto dq = random_values(static_cast<std::size_t>(qs.numel()), 80, DType::f32);
  auto dkv = random_values(static_cast<std::size_t>(ks.numel()), 81, DType::f32);
  std::vector<float> dqkv(static_cast<std::size_t>(ds.numel()));
  cpu().attention_grad_pack(host(dqkv, ds), host(dq, qs), host(dkv, ks));

  auto gdq = on_device(gpu(), dq, qs, DType::f32), gdkv = on_device(gpu(), dkv, ks, DType::f32);
  DeviceTensor gdqkv(gpu(), ds, act());
  gpu().attention_grad_pack(gdqkv, *gdq, *gdkv);
  EXPECT_TRUE(same_bits(gdqkv.download(), rounded(dqkv, act()))) << "grad pack into " << dtype_name(act());
}

// ---- composed: a split sequence against the whole ----

struct SplitCase {
  std::int64_t batch, heads, kv_heads, head_dim;
  std::vector<std::int64_t> parts;  // lengths of the sequence's consecutive parts
  std::int64_t seq() const {
    std::int64_t s = 0;
    for (auto p : parts) s += p;
    return s;
  }
  std::string str() const {
    std::string s = "B=";  // appended piece by piece: GCC 12 misreads chains of temporaries (-Wrestrict)
    s += std::to_string(batch);
    s += " H=";
    s += std::to_string(heads);
    s += " Hkv=";
    s += std::to_string(kv_heads);
    s += " Dh=";
    s += std::to_string(head_dim);
    s += " parts";
    for (auto p : parts) {
      s += ' ';
      s += std::to_string(p);
    }
    return s;
  }
};

// Each query part meets the key parts before it (no mask) and its own (causal): the blocks a
// rank of context parallelism meets, in ring order.
TEST_P(GpuAttentionBlocksTest, SplitSequenceMatchesWholeSequenceAttention) {
  const SplitCase cases[] = {{2, 8, 2, 64, {40, 56}}, {1, 4, 4, 40, {20, 30, 27}}, {3, 6, 1, 16, {1, 16, 16}},
                             {2, 4, 2, 128, {64, 66}}};
  for (const auto& c : cases) {
    const std::int64_t S = c.seq(), OW = c.heads * c.head_dim;
    const std::int64_t W = (c.heads + 2 * c.kv_heads) * c.head_dim, KW = 2 * c.kv_heads * c.head_dim;
    const Shape qs{c.batch, S, W}, ks{c.batch, S, KW}, os{c.batch, S, OW}, ls{c.batch, c.heads, S};
    const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
    auto qkv = random_values(static_cast<std::size_t>(qs.numel()), 90, act(), -2.0f, 2.0f);
    auto dout = random_values(static_cast<std::size_t>(os.numel()), 91, act());
    std::vector<float> out(static_cast<std::size_t>(os.numel())), lse(static_cast<std::size_t>(ls.numel()));
    std::vector<float> dqkv(qkv.size());
    test::whole_attention_forward(cpu(), host(out, os), host(lse, ls), host(qkv, qs), h, hkv);
    test::whole_attention_backward(cpu(), host(dqkv, qs), host(dout, os), host(qkv, qs), host(out, os), host(lse, ls),
                                   h, hkv);

    auto gqkv = on_device(gpu(), qkv, qs, act()), gdout = on_device(gpu(), dout, os, act());
    DeviceTensor gkv(gpu(), ks, act()), acc(gpu(), os, DType::f32), glse(gpu(), ls, DType::f32);
    gpu().attention_kv_pack(gkv, *gqkv, h, hkv);
    gpu().fill(acc, 0.0f);
    gpu().fill(glse, kNegInf);
    std::vector<SeqRange> ranges;
    for (std::int64_t begin = 0; auto p : c.parts) {
      ranges.push_back({begin, p});
      begin += p;
    }
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const Shape bos{c.batch, ranges[i].count, OW}, bls{c.batch, c.heads, ranges[i].count};
      DeviceTensor block_out(gpu(), bos, DType::f32), block_lse(gpu(), bls, DType::f32);
      for (std::size_t j = 0; j <= i; ++j) {
        gpu().attention_block_forward(block_out, block_lse, *gqkv, ranges[i], gkv, ranges[j],
                                      i == j ? kCausal : kNone, h, hkv);
        gpu().attention_merge(acc, glse, block_out, block_lse, ranges[i]);
      }
    }
    const std::string at = c.str();
    expect_close(acc.download(), out, act_tolerance(act(), Measure::norm_rel), "split out " + at);
    expect_lse_close(glse.download(), lse, "split lse " + at);

    DeviceTensor gout(gpu(), os, act()), dq(gpu(), os, DType::f32), dkv(gpu(), ks, DType::f32);
    DeviceTensor gdqkv(gpu(), qs, act());
    gpu().convert(gout, acc);  // the merged out in act, as the output projection reads it
    gpu().fill(dq, 0.0f);
    gpu().fill(dkv, 0.0f);
    for (std::size_t i = 0; i < ranges.size(); ++i)
      for (std::size_t j = 0; j <= i; ++j)
        gpu().attention_block_backward(dq, dkv, *gdout, *gqkv, ranges[i], gkv, ranges[j], gout, glse,
                                       i == j ? kCausal : kNone, h, hkv);
    gpu().attention_grad_pack(gdqkv, dq, dkv);
    const std::int64_t bounds[] = {0, OW, OW + KW / 2, W};
    const auto got = gdqkv.download();
    const char* names[] = {"dq", "dk", "dv"};
    for (int p = 0; p < 3; ++p)
      expect_close(part(got, c.batch, S, W, {0, S}, bounds[p], bounds[p + 1] - bounds[p]),
                   part(dqkv, c.batch, S, W, {0, S}, bounds[p], bounds[p + 1] - bounds[p]),
                   act_tolerance(act(), Measure::norm_rel), std::string("split ") + names[p] + " " + at);
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuAttentionBlocksTest, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
