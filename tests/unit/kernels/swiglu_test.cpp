// SwiGLU on the fused gate/up projection.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

// gate_up (N, 2F) -> out (N, F) = silu(gate) * up
std::vector<double> swiglu_ref(const std::vector<double>& gu, int n, int f) {
  std::vector<double> out(static_cast<std::size_t>(n * f));
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < f; ++k) {
      const double g = gu[static_cast<std::size_t>(i * 2 * f + k)], u = gu[static_cast<std::size_t>(i * 2 * f + f + k)];
      out[static_cast<std::size_t>(i * f + k)] = g / (1.0 + std::exp(-g)) * u;
    }
  return out;
}

struct Case {
  int n, f;
  float range;
};
// Wide gate ranges reach the saturated ends of the sigmoid.
const Case kCases[] = {{1, 1, 2.0f}, {7, 13, 3.0f}, {3, 40, 6.0f}, {5, 17, 40.0f}, {300, 150, 4.0f}};

TEST(CpuSwiGlu, ForwardMatchesFloat64) {
  CpuBackend cpu(2);
  for (auto [n, f, range] : kCases) {
    auto gu = random_floats(static_cast<std::size_t>(n * 2 * f), 1, -range, range);
    std::vector<float> out(static_cast<std::size_t>(n * f));
    cpu.swiglu_forward(test::f32(out, {n, f}), test::f32(gu, {n, 2 * f}));
    EXPECT_LT(test::rel_error(out, swiglu_ref(test::to_double(gu), n, f)), test::kForwardTol) << n << "x" << f;
  }
}

TEST(CpuSwiGlu, BackwardMatchesFiniteDifferences) {
  CpuBackend cpu(2);
  for (auto [n, f, range] : kCases) {
    if (n * f > 1000) continue;  // finite differences on the small cases only
    auto gu = random_floats(static_cast<std::size_t>(n * 2 * f), 2, -range, range);
    auto r = random_floats(static_cast<std::size_t>(n * f), 3);
    std::vector<float> dgu(gu.size());
    cpu.swiglu_backward(test::f32(dgu, {n, 2 * f}), test::f32(r, {n, f}), test::f32(gu, {n, 2 * f}));
    const auto rd = test::to_double(r);
    const auto want = test::numeric_gradient(
        [&](const std::vector<double>& v) { return test::weighted_sum(swiglu_ref(v, n, f), rd); }, test::to_double(gu));
    EXPECT_LT(test::rel_error(dgu, want), test::kBackwardTol) << n << "x" << f;
  }
}

TEST(CpuSwiGlu, DeterministicAcrossThreadCounts) {
  const int n = 300, f = 150;
  auto gu = random_floats(n * 2 * f, 4, -4.0f, 4.0f);
  auto r = random_floats(n * f, 5);
  std::vector<float> out1(n * f), d1(gu.size());
  CpuBackend(1).swiglu_forward(test::f32(out1, {n, f}), test::f32(gu, {n, 2 * f}));
  CpuBackend(1).swiglu_backward(test::f32(d1, {n, 2 * f}), test::f32(r, {n, f}), test::f32(gu, {n, 2 * f}));
  for (int threads : {2, 3}) {
    std::vector<float> out(n * f), d(gu.size());
    CpuBackend(threads).swiglu_forward(test::f32(out, {n, f}), test::f32(gu, {n, 2 * f}));
    CpuBackend(threads).swiglu_backward(test::f32(d, {n, 2 * f}), test::f32(r, {n, f}), test::f32(gu, {n, 2 * f}));
    EXPECT_TRUE(test::same_bits(out, out1));
    EXPECT_TRUE(test::same_bits(d, d1));
  }
}

}  // namespace
}  // namespace ustrain
