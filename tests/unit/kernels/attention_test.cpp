// Causal grouped-query attention of whole sequences on fused QKV rows: the CPU's self blocks
// (every query row of qkv against its own keys, kernels/backend.h), as the ring runs cp = 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/unit/kernels/reference.h"
#include "tests/unit/kernels/whole_attention.h"

namespace ustrain {
namespace {

using test::random_floats;

struct AttnCase {
  int batch, seq, heads, kv_heads, head_dim;
  int width() const { return (heads + 2 * kv_heads) * head_dim; }
  int out_width() const { return heads * head_dim; }
  std::size_t qkv_numel() const { return static_cast<std::size_t>(batch * seq * width()); }
  std::size_t out_numel() const { return static_cast<std::size_t>(batch * seq * out_width()); }
  std::size_t lse_numel() const { return static_cast<std::size_t>(batch * heads * seq); }
  Shape qkv_shape() const { return {batch, seq, width()}; }
  Shape out_shape() const { return {batch, seq, out_width()}; }
  Shape lse_shape() const { return {batch, heads, seq}; }
};

// Small enough for finite differences; 67 and 130 cross the query tiles of the CPU kernel.
const AttnCase kSmallCases[] = {{1, 1, 1, 1, 1}, {2, 5, 6, 2, 6},  {1, 7, 3, 3, 4},
                                {2, 9, 4, 1, 8}, {1, 67, 2, 1, 4}, {1, 130, 1, 1, 2}};
const AttnCase kLargeCases[] = {{2, 130, 6, 2, 6}, {1, 200, 8, 4, 32}};

struct AttnRef {
  std::vector<double> out, lse;
};

AttnRef attention_ref(const std::vector<double>& qkv, const AttnCase& c) {
  AttnRef r{std::vector<double>(c.out_numel()), std::vector<double>(c.lse_numel())};
  const int dh = c.head_dim, w = c.width(), group = c.heads / c.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  std::vector<double> scores(static_cast<std::size_t>(c.seq));
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h) {
      const int kv = h / group;
      const double* base = qkv.data() + static_cast<std::size_t>(b * c.seq * w);
      for (int i = 0; i < c.seq; ++i) {
        const double* q = base + i * w + h * dh;
        double m = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const double* k = base + j * w + (c.heads + kv) * dh;
          double s = 0.0;
          for (int d = 0; d < dh; ++d) s += q[d] * k[d];
          scores[j] = s * scale;
          m = std::max(m, scores[j]);
        }
        double sum = 0.0;
        for (int j = 0; j <= i; ++j) sum += std::exp(scores[j] - m);
        const double lse = m + std::log(sum);
        r.lse[static_cast<std::size_t>((b * c.heads + h) * c.seq + i)] = lse;
        double* o = r.out.data() + static_cast<std::size_t>((b * c.seq + i) * c.out_width() + h * dh);
        for (int j = 0; j <= i; ++j) {
          const double p = std::exp(scores[j] - lse);
          const double* v = base + j * w + (c.heads + c.kv_heads + kv) * dh;
          for (int d = 0; d < dh; ++d) o[d] += p * v[d];
        }
      }
    }
  return r;
}

struct AttnRun {
  std::vector<float> out, lse;
};

AttnRun run_forward(CpuBackend& cpu, std::vector<float>& qkv, const AttnCase& c) {
  AttnRun r{std::vector<float>(c.out_numel()), std::vector<float>(c.lse_numel())};
  test::whole_attention_forward(cpu, test::f32(r.out, c.out_shape()), test::f32(r.lse, c.lse_shape()),
                                test::f32(qkv, c.qkv_shape()), c.heads, c.kv_heads);
  return r;
}

std::vector<float> run_backward(CpuBackend& cpu, std::vector<float>& qkv, AttnRun& fwd, std::vector<float>& dout,
                                const AttnCase& c) {
  std::vector<float> dqkv(c.qkv_numel(), 1234.0f);  // overwritten, never accumulated
  test::whole_attention_backward(cpu, test::f32(dqkv, c.qkv_shape()), test::f32(dout, c.out_shape()),
                                 test::f32(qkv, c.qkv_shape()), test::f32(fwd.out, c.out_shape()),
                                 test::f32(fwd.lse, c.lse_shape()), c.heads, c.kv_heads);
  return dqkv;
}

std::string describe(const AttnCase& c) {
  return "B=" + std::to_string(c.batch) + " S=" + std::to_string(c.seq) + " H=" + std::to_string(c.heads) +
         " Hkv=" + std::to_string(c.kv_heads) + " Dh=" + std::to_string(c.head_dim);
}

TEST(CpuAttention, ForwardMatchesFloat64) {
  CpuBackend cpu(2);
  std::vector<AttnCase> cases(std::begin(kSmallCases), std::end(kSmallCases));
  cases.insert(cases.end(), std::begin(kLargeCases), std::end(kLargeCases));
  for (const auto& c : cases) {
    auto qkv = random_floats(c.qkv_numel(), 1, -2.0f, 2.0f);
    const auto got = run_forward(cpu, qkv, c);
    const auto want = attention_ref(test::to_double(qkv), c);
    EXPECT_LT(test::rel_error(got.out, want.out), test::kForwardTol) << describe(c);
    EXPECT_LT(test::rel_error(got.lse, want.lse), test::kForwardTol) << describe(c);
  }
}

TEST(CpuAttention, BackwardMatchesFiniteDifferences) {
  CpuBackend cpu(2);
  for (const auto& c : kSmallCases) {
    auto qkv = random_floats(c.qkv_numel(), 2, -2.0f, 2.0f);
    auto r = random_floats(c.out_numel(), 3);
    auto fwd = run_forward(cpu, qkv, c);
    const auto dqkv = run_backward(cpu, qkv, fwd, r, c);
    const auto rd = test::to_double(r);
    const auto want = test::numeric_gradient(
        [&](const std::vector<double>& v) { return test::weighted_sum(attention_ref(v, c).out, rd); },
        test::to_double(qkv));
    EXPECT_LT(test::rel_error(dqkv, want), test::kBackwardTol) << describe(c);
  }
}

TEST(CpuAttention, LaterTokensDoNotChangeEarlierOutputs) {
  CpuBackend cpu(2);
  const AttnCase c{2, 70, 4, 2, 8};
  auto qkv = random_floats(c.qkv_numel(), 4);
  const auto base = run_forward(cpu, qkv, c);
  for (int t : {3, 66}) {
    auto changed = qkv;
    const auto noise =
        random_floats(static_cast<std::size_t>(c.width()), 5 + static_cast<std::uint32_t>(t), 2.0f, 3.0f);
    std::copy(noise.begin(), noise.end(), changed.begin() + t * c.width());  // batch 0, token t
    const auto after = run_forward(cpu, changed, c);
    for (int s = 0; s < c.seq; ++s) {
      const auto row = base.out.begin() + s * c.out_width();
      const bool same = std::equal(row, row + c.out_width(), after.out.begin() + s * c.out_width());
      EXPECT_EQ(same, s < t) << "token " << t << " row " << s;
    }
    for (int h = 0; h < c.heads; ++h)
      for (int s = 0; s < t; ++s) ASSERT_EQ(after.lse[h * c.seq + s], base.lse[h * c.seq + s]);
    // The second sequence of the batch is untouched.
    EXPECT_TRUE(std::equal(base.out.begin() + c.seq * c.out_width(), base.out.end(),
                           after.out.begin() + c.seq * c.out_width()));
  }
}

TEST(CpuAttention, BitwiseDeterministicAcrossRunsAndThreadCounts) {
  const AttnCase c{3, 100, 4, 2, 8};
  auto qkv = random_floats(c.qkv_numel(), 6);
  auto dout = random_floats(c.out_numel(), 7);
  CpuBackend one(1);
  auto fwd = run_forward(one, qkv, c);
  const auto dqkv = run_backward(one, qkv, fwd, dout, c);
  for (int threads : {1, 2, 3}) {
    CpuBackend cpu(threads);
    auto again = run_forward(cpu, qkv, c);
    EXPECT_TRUE(test::same_bits(again.out, fwd.out)) << threads;
    EXPECT_TRUE(test::same_bits(again.lse, fwd.lse)) << threads;
    EXPECT_TRUE(test::same_bits(run_backward(cpu, qkv, again, dout, c), dqkv)) << threads;
  }
}

// A self block reads its keys in place; the same block of packed keys (kv_pack) gives the same
// result, and the same gradient once the fp32 sums are packed (grad_pack), under either mask.
TEST(CpuAttention, ASelfBlockEqualsTheBlockOfItsPackedKeys) {
  CpuBackend cpu(2);
  const AttnCase c{2, 70, 4, 2, 8};
  const int kvw = 2 * c.kv_heads * c.head_dim;
  const Shape kv_shape{c.batch, c.seq, kvw};
  const SeqRange all{0, c.seq};
  auto qkv = random_floats(c.qkv_numel(), 9, -2.0f, 2.0f);
  auto dout = random_floats(c.out_numel(), 10);
  std::vector<float> kv(static_cast<std::size_t>(c.batch * c.seq * kvw));
  cpu.attention_kv_pack(test::f32(kv, kv_shape), test::f32(qkv, c.qkv_shape()), c.heads, c.kv_heads);
  for (const AttentionMask& mask : {AttentionMask::causal(), AttentionMask::none()}) {
    SCOPED_TRACE(mask_kind_name(mask.kind));
    AttnRun self{std::vector<float>(c.out_numel()), std::vector<float>(c.lse_numel())}, packed = self;
    cpu.attention_block_forward(test::f32(self.out, c.out_shape()), test::f32(self.lse, c.lse_shape()),
                                test::f32(qkv, c.qkv_shape()), all, Tensor(), all, mask, c.heads, c.kv_heads);
    cpu.attention_block_forward(test::f32(packed.out, c.out_shape()), test::f32(packed.lse, c.lse_shape()),
                                test::f32(qkv, c.qkv_shape()), all, test::f32(kv, kv_shape), all, mask, c.heads,
                                c.kv_heads);
    EXPECT_LT(test::rel_error(self.out, test::to_double(packed.out)), 1e-6);
    EXPECT_LT(test::rel_error(self.lse, test::to_double(packed.lse)), 1e-6);

    std::vector<float> dqkv(c.qkv_numel(), 1234.0f), dq(c.out_numel(), 0.0f), dkv(kv.size(), 0.0f);
    cpu.attention_block_backward(test::f32(dqkv, c.qkv_shape()), Tensor(), test::f32(dout, c.out_shape()),
                                 test::f32(qkv, c.qkv_shape()), all, Tensor(), all, test::f32(self.out, c.out_shape()),
                                 test::f32(self.lse, c.lse_shape()), mask, c.heads, c.kv_heads);
    cpu.attention_block_backward(test::f32(dq, c.out_shape()), test::f32(dkv, kv_shape), test::f32(dout, c.out_shape()),
                                 test::f32(qkv, c.qkv_shape()), all, test::f32(kv, kv_shape), all,
                                 test::f32(self.out, c.out_shape()), test::f32(self.lse, c.lse_shape()), mask, c.heads,
                                 c.kv_heads);
    std::vector<float> from_packed(c.qkv_numel());
    cpu.attention_grad_pack(test::f32(from_packed, c.qkv_shape()), test::f32(dq, c.out_shape()),
                            test::f32(dkv, kv_shape));
    EXPECT_LT(test::rel_error(dqkv, test::to_double(from_packed)), 1e-6);
  }
}

TEST(CpuAttention, RejectsHeadCountsThatDoNotGroup) {
  CpuBackend cpu(1);
  const AttnCase c{1, 3, 3, 2, 4};
  auto qkv = random_floats(c.qkv_numel(), 8);
  EXPECT_THROW(run_forward(cpu, qkv, c), std::logic_error);
}

}  // namespace
}  // namespace ustrain
