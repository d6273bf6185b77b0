// The CUDA backend's self blocks against the CPU reference: every query row of qkv against its
// own keys (kernels/backend.h), as context parallelism's ring runs the whole sequence at cp = 1,
// under both masks, with results in act or fp32. Where cuDNN's whole-sequence graphs take the
// block (causal, bf16 or f16, cudnn_supports) they run it; our kernel runs the rest, writing
// act or fp32 out, and overwriting dqkv (prefilled here, so that an accumulation would show).
// Tolerances as in gpu_matmul_ops_test.cpp: act's bound for out and the gradients (cuDNN and
// our kernels round them to act), the fp32 bound for lse.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "kernels/cuda/attention/attention_layout.h"

namespace ustrain::gpu_test {
namespace {

class GpuSelfAttentionTest : public GpuActTest {};

struct SelfCase {
  std::int64_t batch, seq, heads, kv_heads, head_dim;
  AttentionMask mask;
  std::int64_t width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::string str() const {
    std::string s = "B=";  // appended piece by piece: GCC 12 misreads chains of temporaries (-Wrestrict)
    for (const std::int64_t v : {batch, seq, heads, kv_heads, head_dim}) {
      s += std::to_string(v);
      s += ' ';
    }
    s += mask_kind_name(mask.kind);
    return s;
  }
};

// cuDNN's shapes (causal) and ours: a head size it refuses (12), no mask, one-token sequences.
const SelfCase kSelfCases[] = {{2, 128, 8, 2, 64, AttentionMask::causal()}, {2, 33, 4, 2, 12, AttentionMask::causal()},
                               {2, 70, 4, 2, 16, AttentionMask::none()},    {3, 9, 6, 1, 16, AttentionMask::none()},
                               {2, 1, 4, 4, 8, AttentionMask::causal()}};

TEST_P(GpuSelfAttentionTest, SelfBlocksMatchCpuAndOverwriteTheirGradient) {
  for (const SelfCase& c : kSelfCases) {
    const std::int64_t OW = c.heads * c.head_dim;
    const Shape qs{c.batch, c.seq, c.width()}, os{c.batch, c.seq, OW}, ls{c.batch, c.heads, c.seq};
    const SeqRange all{0, c.seq};
    const int h = static_cast<int>(c.heads), hkv = static_cast<int>(c.kv_heads);
    auto qkv = random_values(static_cast<std::size_t>(qs.numel()), 110, act(), -2.0f, 2.0f);
    auto dout = random_values(static_cast<std::size_t>(os.numel()), 111, act());
    std::vector<float> out(static_cast<std::size_t>(os.numel())), lse(static_cast<std::size_t>(ls.numel()));
    cpu().attention_block_forward(host(out, os), host(lse, ls), host(qkv, qs), all, Tensor(), all, c.mask, h, hkv);

    auto gqkv = on_device(gpu(), qkv, qs, act()), gdout = on_device(gpu(), dout, os, act());
    for (const DType result : {act(), DType::f32}) {
      const std::string at = c.str() + " results " + dtype_name(result);
      DeviceTensor gout(gpu(), os, result), glse(gpu(), ls, DType::f32);
      gpu().attention_block_forward(gout, glse, *gqkv, all, Tensor(), all, c.mask, h, hkv);
      expect_close(gout.download(), out, act_tolerance(act(), Measure::norm_rel), "self out " + at);
      expect_close(glse.download(), lse, fp32_tolerance(Measure::norm_rel), "self lse " + at);

      // The backward from the GPU's out, which the CPU reads too.
      auto out_values = gout.download();
      std::vector<float> dqkv(qkv.size(), 1234.0f);
      cpu().attention_block_backward(host(dqkv, qs), Tensor(), host(dout, os), host(qkv, qs), all, Tensor(), all,
                                     host(out_values, os), host(lse, ls), c.mask, h, hkv);
      auto gdqkv = on_device(gpu(), std::vector<float>(qkv.size(), 1234.0f), qs, result);
      gpu().attention_block_backward(*gdqkv, Tensor(), *gdout, *gqkv, all, Tensor(), all, gout, glse, c.mask, h, hkv);
      const auto got = gdqkv->download();
      expect_close(got, dqkv, act_tolerance(act(), Measure::norm_rel), "self dqkv " + at);

      // Our kernel is deterministic: the same call again writes the same bits.
      const cuda::AttentionDims whole{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
      const bool causal = c.mask.kind == AttentionMask::Kind::causal;
      if (causal && result == act() && cuda::cudnn_supports(whole, act())) continue;  // cuDNN ran it
      gpu().attention_block_backward(*gdqkv, Tensor(), *gdout, *gqkv, all, Tensor(), all, gout, glse, c.mask, h, hkv);
      EXPECT_TRUE(same_bits(gdqkv->download(), got)) << "self block backward is not deterministic, " << at;
      if (act() == DType::f32) break;  // one result dtype
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuSelfAttentionTest, ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
