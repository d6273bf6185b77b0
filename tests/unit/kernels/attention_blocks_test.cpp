// Attention over blocks of the sequence (context parallelism's ops) against float64: a range of
// queries against a range of packed keys/values under each mask, S_q != S_kv, MHA, GQA and MQA;
// the block backward against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

struct BlockCase {
  int batch, q_seq, kv_seq, heads, kv_heads, head_dim;
  SeqRange q, k;
  AttentionMask mask;
  int width() const { return (heads + 2 * kv_heads) * head_dim; }
  int kv_width() const { return 2 * kv_heads * head_dim; }
  int out_width() const { return heads * head_dim; }
  Shape qkv_shape() const { return {batch, q_seq, width()}; }
  Shape kv_shape() const { return {batch, kv_seq, kv_width()}; }
  Shape out_shape() const { return {batch, q.count, out_width()}; }
  Shape lse_shape() const { return {batch, heads, q.count}; }
  std::size_t qkv_numel() const { return static_cast<std::size_t>(qkv_shape().numel()); }
  std::size_t kv_numel() const { return static_cast<std::size_t>(kv_shape().numel()); }
  std::size_t out_numel() const { return static_cast<std::size_t>(out_shape().numel()); }
  std::size_t lse_numel() const { return static_cast<std::size_t>(lse_shape().numel()); }
  std::int64_t visible(std::int64_t r) const {
    if (mask.kind == AttentionMask::Kind::none) return k.count;
    return std::clamp<std::int64_t>(r + 1 + k.count - q.count, 0, k.count);
  }
};

std::string describe(const BlockCase& c) {
  return "B=" + std::to_string(c.batch) + " H=" + std::to_string(c.heads) + " Hkv=" + std::to_string(c.kv_heads) +
         " q=[" + std::to_string(c.q.begin) + "+" + std::to_string(c.q.count) + ") k=[" + std::to_string(c.k.begin) +
         "+" + std::to_string(c.k.count) + ") " + (c.mask.kind == AttentionMask::Kind::causal ? "causal" : "none");
}

// MHA, GQA and MQA; causal blocks with as many, fewer and more queries than keys (rows that
// see no key), unmasked ones; 70 and 130 rows cross the CPU kernel's query tiles.
const BlockCase kCases[] = {
    {1, 6, 6, 2, 2, 4, {0, 6}, {0, 6}, AttentionMask::causal()},
    {2, 9, 7, 4, 2, 4, {2, 5}, {1, 6}, AttentionMask::none()},
    {1, 8, 10, 3, 1, 4, {1, 7}, {0, 10}, AttentionMask::causal()},
    {2, 10, 4, 2, 1, 2, {0, 8}, {1, 3}, AttentionMask::causal()},
    {1, 70, 40, 4, 4, 8, {3, 67}, {5, 33}, AttentionMask::none()},
    {1, 130, 130, 4, 1, 8, {0, 130}, {0, 130}, AttentionMask::causal()},
};
const double kNegInf = -std::numeric_limits<double>::infinity();

struct BlockRef {
  std::vector<double> out, lse;
};

BlockRef block_ref(const std::vector<double>& qkv, const std::vector<double>& kv, const BlockCase& c) {
  BlockRef r{std::vector<double>(c.out_numel(), 0.0), std::vector<double>(c.lse_numel())};
  const int dh = c.head_dim, group = c.heads / c.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (std::int64_t i = 0; i < c.q.count; ++i) {
        const double* q = qkv.data() + (b * c.q_seq + c.q.begin + i) * c.width() + h * dh;
        const std::int64_t visible = c.visible(i);
        std::vector<double> s(static_cast<std::size_t>(visible));
        double m = kNegInf;
        for (std::int64_t j = 0; j < visible; ++j) {
          const double* k = kv.data() + (b * c.kv_seq + c.k.begin + j) * c.kv_width() + (h / group) * dh;
          double dot = 0;
          for (int d = 0; d < dh; ++d) dot += q[d] * k[d];
          s[static_cast<std::size_t>(j)] = dot * scale;
          m = std::max(m, dot * scale);
        }
        double sum = 0;
        for (double x : s) sum += std::exp(x - m);
        const double lse = visible == 0 ? kNegInf : m + std::log(sum);
        r.lse[static_cast<std::size_t>((b * c.heads + h) * c.q.count + i)] = lse;
        double* o = r.out.data() + (b * c.q.count + i) * c.out_width() + h * dh;
        for (std::int64_t j = 0; j < visible; ++j) {
          const double p = std::exp(s[static_cast<std::size_t>(j)] - lse);
          const double* v = kv.data() + (b * c.kv_seq + c.k.begin + j) * c.kv_width() + (c.kv_heads + h / group) * dh;
          for (int d = 0; d < dh; ++d) o[d] += p * v[d];
        }
      }
  return r;
}

struct BlockRun {
  std::vector<float> out, lse;
};

BlockRun run_block(CpuBackend& cpu, std::vector<float>& qkv, std::vector<float>& kv, const BlockCase& c) {
  BlockRun r{std::vector<float>(c.out_numel(), 7.0f), std::vector<float>(c.lse_numel(), 7.0f)};
  cpu.attention_block_forward(test::f32(r.out, c.out_shape()), test::f32(r.lse, c.lse_shape()),
                              test::f32(qkv, c.qkv_shape()), c.q, test::f32(kv, c.kv_shape()), c.k, c.mask, c.heads,
                              c.kv_heads);
  return r;
}

TEST(CpuAttentionBlocks, ForwardMatchesFloat64) {
  CpuBackend cpu(2);
  for (const BlockCase& c : kCases) {
    auto qkv = random_floats(c.qkv_numel(), 11, -2.0f, 2.0f);
    auto kv = random_floats(c.kv_numel(), 12, -2.0f, 2.0f);
    const BlockRun got = run_block(cpu, qkv, kv, c);
    const BlockRef want = block_ref(test::to_double(qkv), test::to_double(kv), c);
    EXPECT_LT(test::rel_error(got.out, want.out), test::kForwardTol) << describe(c);
    for (std::size_t i = 0; i < want.lse.size(); ++i) {
      if (std::isinf(want.lse[i])) {
        EXPECT_TRUE(std::isinf(got.lse[i]) && got.lse[i] < 0) << describe(c) << " row " << i;
      } else {
        EXPECT_NEAR(got.lse[i], want.lse[i], 1e-5 * (1 + std::abs(want.lse[i]))) << describe(c) << " row " << i;
      }
    }
  }
}

TEST(CpuAttentionBlocks, MergingTwoBlocksEqualsOneBlockOverBoth) {
  // Keys [0, 10) in one block equal keys [0, 4) merged with keys [4, 10), whatever the order.
  CpuBackend cpu(2);
  const BlockCase whole{2, 6, 10, 4, 2, 4, {0, 6}, {0, 10}, AttentionMask::none()};
  auto qkv = random_floats(whole.qkv_numel(), 21, -2.0f, 2.0f);
  auto kv = random_floats(whole.kv_numel(), 22, -2.0f, 2.0f);
  const BlockRun want = run_block(cpu, qkv, kv, whole);
  BlockCase front = whole, back = whole;
  front.k = {0, 4};
  back.k = {4, 6};
  BlockRun acc = run_block(cpu, qkv, kv, back);
  BlockRun part = run_block(cpu, qkv, kv, front);
  cpu.attention_merge(test::f32(acc.out, whole.out_shape()), test::f32(acc.lse, whole.lse_shape()),
                      test::f32(part.out, whole.out_shape()), test::f32(part.lse, whole.lse_shape()), whole.q);
  for (std::size_t i = 0; i < want.out.size(); ++i) EXPECT_NEAR(acc.out[i], want.out[i], 2e-6) << i;
  for (std::size_t i = 0; i < want.lse.size(); ++i) EXPECT_NEAR(acc.lse[i], want.lse[i], 2e-6) << i;
  // A block whose rows see no key (lse -inf) leaves the running result as it was.
  BlockRun empty{std::vector<float>(whole.out_numel(), 5.0f),
                 std::vector<float>(whole.lse_numel(), -std::numeric_limits<float>::infinity())};
  const BlockRun before = acc;
  cpu.attention_merge(test::f32(acc.out, whole.out_shape()), test::f32(acc.lse, whole.lse_shape()),
                      test::f32(empty.out, whole.out_shape()), test::f32(empty.lse, whole.lse_shape()), whole.q);
  EXPECT_TRUE(test::same_bits(acc.out, before.out));
  EXPECT_TRUE(test::same_bits(acc.lse, before.lse));
}

TEST(CpuAttentionBlocks, BackwardMatchesFiniteDifferences) {
  // One block whose result is the merged result: the gradient of sum(out * r) with respect to
  // the query rows of qkv and to kv, accumulated onto what dq and dkv held.
  CpuBackend cpu(2);
  for (const BlockCase& c : {kCases[0], kCases[1], kCases[2], kCases[3]}) {
    auto qkv = random_floats(c.qkv_numel(), 31, -2.0f, 2.0f);
    auto kv = random_floats(c.kv_numel(), 32, -2.0f, 2.0f);
    const BlockRun fwd = run_block(cpu, qkv, kv, c);
    // The merged out, dout and lse of every query row of qkv; rows outside the block are 0.
    const std::size_t full_out = static_cast<std::size_t>(c.batch * c.q_seq * c.out_width());
    std::vector<float> out(full_out, 0.0f), dout(full_out, 0.0f);
    std::vector<float> lse(static_cast<std::size_t>(c.batch * c.heads * c.q_seq), 0.0f);
    auto r = random_floats(c.out_numel(), 33);
    for (int b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < c.q.count; ++i) {
        const std::size_t at = static_cast<std::size_t>((b * c.q_seq + c.q.begin + i) * c.out_width());
        const std::size_t from = static_cast<std::size_t>((b * c.q.count + i) * c.out_width());
        std::copy_n(fwd.out.begin() + static_cast<std::ptrdiff_t>(from), c.out_width(), out.begin() + static_cast<std::ptrdiff_t>(at));
        std::copy_n(r.begin() + static_cast<std::ptrdiff_t>(from), c.out_width(), dout.begin() + static_cast<std::ptrdiff_t>(at));
        for (int h = 0; h < c.heads; ++h)
          lse[static_cast<std::size_t>((b * c.heads + h) * c.q_seq + c.q.begin + i)] =
              fwd.lse[static_cast<std::size_t>((b * c.heads + h) * c.q.count + i)];
      }
    const Shape full{c.batch, c.q_seq, c.out_width()};
    std::vector<float> dq(full_out, 0.5f), dkv(c.kv_numel(), 0.25f);  // accumulated onto
    cpu.attention_block_backward(test::f32(dq, full), test::f32(dkv, c.kv_shape()), test::f32(dout, full),
                                 test::f32(qkv, c.qkv_shape()), c.q, test::f32(kv, c.kv_shape()), c.k,
                                 test::f32(out, full), test::f32(lse, Shape{c.batch, c.heads, c.q_seq}), c.mask,
                                 c.heads, c.kv_heads);
    const auto rd = test::to_double(r);
    const auto kvd = test::to_double(kv);
    const auto qkvd = test::to_double(qkv);
    auto want_q = test::numeric_gradient(
        [&](const std::vector<double>& v) { return test::weighted_sum(block_ref(v, kvd, c).out, rd); }, qkvd);
    auto want_kv = test::numeric_gradient(
        [&](const std::vector<double>& v) { return test::weighted_sum(block_ref(qkvd, v, c).out, rd); }, kvd);
    // dq holds the q columns of qkv's rows (B, Sq, H Dh), plus what it held.
    std::vector<double> want_dq(full_out);
    for (std::size_t row = 0; row < static_cast<std::size_t>(c.batch * c.q_seq); ++row)
      for (int j = 0; j < c.out_width(); ++j)
        want_dq[row * static_cast<std::size_t>(c.out_width()) + static_cast<std::size_t>(j)] =
            0.5 + want_q[row * static_cast<std::size_t>(c.width()) + static_cast<std::size_t>(j)];
    for (double& g : want_kv) g += 0.25;
    EXPECT_LT(test::rel_error(dq, want_dq), test::kBackwardTol) << describe(c);
    EXPECT_LT(test::rel_error(dkv, want_kv), test::kBackwardTol) << describe(c);
  }
}

TEST(CpuAttentionBlocks, PacksMoveTheKeyValueAndGradientColumns) {
  CpuBackend cpu(2);
  const int B = 2, S = 3, H = 4, Hkv = 2, Dh = 2, W = (H + 2 * Hkv) * Dh, KW = 2 * Hkv * Dh;
  auto qkv = random_floats(static_cast<std::size_t>(B * S * W), 41);
  std::vector<float> kv(static_cast<std::size_t>(B * S * KW));
  cpu.attention_kv_pack(test::f32(kv, Shape{B, S, KW}), test::f32(qkv, Shape{B, S, W}), H, Hkv);
  std::vector<float> dq(static_cast<std::size_t>(B * S * H * Dh));
  for (int row = 0; row < B * S; ++row) {
    for (int j = 0; j < KW; ++j) EXPECT_EQ(kv[static_cast<std::size_t>(row * KW + j)], qkv[static_cast<std::size_t>(row * W + H * Dh + j)]);
    for (int j = 0; j < H * Dh; ++j) dq[static_cast<std::size_t>(row * H * Dh + j)] = qkv[static_cast<std::size_t>(row * W + j)];
  }
  std::vector<float> back(qkv.size(), 9.0f);
  cpu.attention_grad_pack(test::f32(back, Shape{B, S, W}), test::f32(dq, Shape{B, S, H * Dh}), test::f32(kv, Shape{B, S, KW}));
  EXPECT_TRUE(test::same_bits(back, qkv));
}

}  // namespace
}  // namespace ustrain
