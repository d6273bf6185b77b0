// Rotary position embedding (rotate-half): tables, forward, inverse and backward.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

constexpr double kTheta = 10000.0;

struct RopeCase {
  int batch, seq, heads, kv_heads, head_dim;
  int rotated() const { return heads + kv_heads; }
  int width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::size_t numel() const { return static_cast<std::size_t>(batch * seq * width()); }
};
const RopeCase kCases[] = {{1, 1, 1, 1, 2}, {2, 5, 6, 2, 6}, {1, 7, 3, 3, 4}, {2, 9, 4, 1, 16}};

// The Hugging Face Llama rotation in float64, on the first `rotated` heads of each row.
std::vector<double> rope_ref(std::vector<double> qkv, const RopeCase& c) {
  const int half = c.head_dim / 2;
  for (int b = 0; b < c.batch; ++b)
    for (int s = 0; s < c.seq; ++s)
      for (int h = 0; h < c.rotated(); ++h) {
        double* x = qkv.data() + (static_cast<std::size_t>(b * c.seq + s) * c.width() + h * c.head_dim);
        for (int i = 0; i < half; ++i) {
          const double angle = s * std::pow(kTheta, -2.0 * i / c.head_dim);
          const double x1 = x[i], x2 = x[i + half];
          x[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          x[i + half] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
      }
  return qkv;
}

struct Tables {
  std::vector<float> cos, sin;
  int rows, half;
  Tensor c() { return test::f32(cos, {rows, half}); }
  Tensor s() { return test::f32(sin, {rows, half}); }
};

// RoPE's inverse frequencies without scaling: theta^(-2i/Dh).
std::vector<double> plain_frequencies(int head_dim) {
  std::vector<double> inv_freq(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(kTheta, -2.0 * static_cast<double>(i) / head_dim);
  return inv_freq;
}

Tables make_tables(CpuBackend& cpu, int rows, int head_dim, const std::vector<double>& inv_freq) {
  const int half = head_dim / 2;
  Tables t{std::vector<float>(static_cast<std::size_t>(rows * half)),
           std::vector<float>(static_cast<std::size_t>(rows * half)), rows, half};
  cpu.rope_tables(t.c(), t.s(), inv_freq, 0);
  return t;
}
Tables make_tables(CpuBackend& cpu, int rows, int head_dim) {
  return make_tables(cpu, rows, head_dim, plain_frequencies(head_dim));
}

TEST(CpuRope, TablesMatchTheFormula) {
  CpuBackend cpu(1);
  const int rows = 300, head_dim = 64;
  auto t = make_tables(cpu, rows, head_dim);
  for (int pos = 0; pos < rows; ++pos)
    for (int i = 0; i < head_dim / 2; ++i) {
      const double angle = pos * std::pow(kTheta, -2.0 * i / head_dim);
      ASSERT_NEAR(t.cos[pos * 32 + i], std::cos(angle), 1e-7) << pos << " " << i;
      ASSERT_NEAR(t.sin[pos * 32 + i], std::sin(angle), 1e-7) << pos << " " << i;
    }
}

TEST(CpuRope, TablesTurnByTheFrequenciesGiven) {
  CpuBackend cpu(1);
  const int rows = 100, head_dim = 8;
  const std::vector<double> inv_freq = {1.0, 0.25, 1e-3, 3e-6};  // any frequencies, e.g. scaled ones
  auto t = make_tables(cpu, rows, head_dim, inv_freq);
  for (int pos = 0; pos < rows; ++pos)
    for (int i = 0; i < head_dim / 2; ++i) {
      ASSERT_EQ(t.cos[pos * 4 + i], static_cast<float>(std::cos(pos * inv_freq[i]))) << pos << " " << i;
      ASSERT_EQ(t.sin[pos * 4 + i], static_cast<float>(std::sin(pos * inv_freq[i]))) << pos << " " << i;
    }
}

TEST(CpuRope, ForwardMatchesFloat64AndLeavesValueHeadsAlone) {
  CpuBackend cpu(2);
  for (const auto& c : kCases) {
    auto t = make_tables(cpu, c.seq + 3, c.head_dim);  // longer tables than the sequence are fine
    auto qkv = random_floats(c.numel(), 1);
    const auto before = qkv;
    cpu.rope_forward(test::f32(qkv, {c.batch, c.seq, c.width()}), t.c(), t.s(), c.rotated(), c.head_dim);
    EXPECT_LT(test::rel_error(qkv, rope_ref(test::to_double(before), c)), test::kForwardTol);
    for (int row = 0; row < c.batch * c.seq; ++row)
      for (int k = c.rotated() * c.head_dim; k < c.width(); ++k)
        ASSERT_EQ(qkv[static_cast<std::size_t>(row * c.width() + k)],
                  before[static_cast<std::size_t>(row * c.width() + k)]);
  }
}

TEST(CpuRope, BackwardInvertsForward) {
  CpuBackend cpu(2);
  for (const auto& c : kCases) {
    auto t = make_tables(cpu, c.seq, c.head_dim);
    auto qkv = random_floats(c.numel(), 2);
    const auto before = test::to_double(qkv);
    const Tensor view = test::f32(qkv, {c.batch, c.seq, c.width()});
    cpu.rope_forward(view, t.c(), t.s(), c.rotated(), c.head_dim);
    cpu.rope_backward(view, t.c(), t.s(), c.rotated(), c.head_dim);
    EXPECT_LT(test::rel_error(qkv, before), 1e-6);
  }
}

TEST(CpuRope, BackwardMatchesFiniteDifferences) {
  CpuBackend cpu(2);
  for (const auto& c : kCases) {
    auto t = make_tables(cpu, c.seq, c.head_dim);
    auto qkv = random_floats(c.numel(), 3);
    auto grad = random_floats(c.numel(), 4);  // dL/d(rope output) = R
    const auto rd = test::to_double(grad);
    cpu.rope_backward(test::f32(grad, {c.batch, c.seq, c.width()}), t.c(), t.s(), c.rotated(), c.head_dim);
    const auto want = test::numeric_gradient(
        [&](const std::vector<double>& v) { return test::weighted_sum(rope_ref(v, c), rd); }, test::to_double(qkv));
    EXPECT_LT(test::rel_error(grad, want), test::kBackwardTol);
  }
}

TEST(CpuRope, RejectsTablesShorterThanTheSequence) {
  CpuBackend cpu(1);
  const RopeCase c{1, 5, 2, 1, 4};
  auto t = make_tables(cpu, c.seq - 1, c.head_dim);
  auto qkv = random_floats(c.numel(), 5);
  EXPECT_THROW(cpu.rope_forward(test::f32(qkv, {c.batch, c.seq, c.width()}), t.c(), t.s(), c.rotated(), c.head_dim),
               std::logic_error);
}

}  // namespace
}  // namespace ustrain
