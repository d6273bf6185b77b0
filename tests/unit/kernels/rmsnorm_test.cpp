// RMSNorm forward against float64, backward against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

constexpr double kEps = 1e-5;

struct RmsNormRef {
  std::vector<double> out, rstd;
};

// x (N, D), w (D)
RmsNormRef rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w, int n, int d) {
  RmsNormRef r{std::vector<double>(x.size()), std::vector<double>(static_cast<std::size_t>(n))};
  for (int i = 0; i < n; ++i) {
    double ss = 0.0;
    for (int c = 0; c < d; ++c) ss += x[i * d + c] * x[i * d + c];
    r.rstd[i] = 1.0 / std::sqrt(ss / d + kEps);
    for (int c = 0; c < d; ++c) r.out[i * d + c] = x[i * d + c] * r.rstd[i] * w[c];
  }
  return r;
}

struct Case {
  int n, d;
};
const Case kCases[] = {{1, 1}, {1, 8}, {7, 13}, {5, 130}, {33, 64}};

TEST(CpuRmsNorm, ForwardMatchesFloat64) {
  CpuBackend cpu(2);
  for (auto [n, d] : kCases) {
    auto x = random_floats(static_cast<std::size_t>(n * d), 1, -2.0f, 2.0f);
    auto w = random_floats(static_cast<std::size_t>(d), 2, 0.5f, 1.5f);
    std::vector<float> out(x.size()), rstd(static_cast<std::size_t>(n));
    cpu.rmsnorm_forward(test::f32(out, {n, d}), test::f32(rstd, {n}), test::f32(x, {n, d}), test::f32(w, {d}),
                        static_cast<float>(kEps));
    const auto want = rmsnorm_ref(test::to_double(x), test::to_double(w), n, d);
    EXPECT_LT(test::rel_error(out, want.out), test::kForwardTol) << n << "x" << d;
    EXPECT_LT(test::rel_error(rstd, want.rstd), test::kForwardTol) << n << "x" << d;
  }
}

TEST(CpuRmsNorm, BackwardMatchesFiniteDifferences) {
  CpuBackend cpu(2);
  for (auto [n, d] : kCases) {
    // With D = 1 the output is w * sign(x) up to eps: dx is an O(eps) cancellation that
    // float32 cannot resolve to a relative tolerance, so that shape is checked forward only.
    if (d == 1) continue;
    auto x = random_floats(static_cast<std::size_t>(n * d), 3, -2.0f, 2.0f);
    auto w = random_floats(static_cast<std::size_t>(d), 4, 0.5f, 1.5f);
    auto r = random_floats(x.size(), 5);
    std::vector<float> out(x.size()), rstd(static_cast<std::size_t>(n)), dx(x.size()), dw(w.size(), 0.0f);
    cpu.rmsnorm_forward(test::f32(out, {n, d}), test::f32(rstd, {n}), test::f32(x, {n, d}), test::f32(w, {d}),
                        static_cast<float>(kEps));
    cpu.rmsnorm_backward(test::f32(dx, {n, d}), test::f32(dw, {d}), test::f32(r, {n, d}), test::f32(x, {n, d}),
                         test::f32(w, {d}), test::f32(rstd, {n}));

    const auto xd = test::to_double(x), wd = test::to_double(w), rd = test::to_double(r);
    const auto want_dx = test::numeric_gradient(
        [&](const std::vector<double>& xv) { return test::weighted_sum(rmsnorm_ref(xv, wd, n, d).out, rd); }, xd);
    const auto want_dw = test::numeric_gradient(
        [&](const std::vector<double>& wv) { return test::weighted_sum(rmsnorm_ref(xd, wv, n, d).out, rd); }, wd);
    EXPECT_LT(test::rel_error(dx, want_dx), test::kBackwardTol) << n << "x" << d;
    EXPECT_LT(test::rel_error(dw, want_dw), test::kBackwardTol) << n << "x" << d;
  }
}

TEST(CpuRmsNorm, BackwardAccumulatesWeightGradientAndMayOverwriteDout) {
  CpuBackend cpu(2);
  const int n = 9, d = 70;
  auto x = random_floats(n * d, 6), w = random_floats(d, 7, 0.5f, 1.5f), g = random_floats(n * d, 8);
  std::vector<float> out(x.size()), rstd(n), dx(x.size()), dw_fresh(d, 0.0f);
  cpu.rmsnorm_forward(test::f32(out, {n, d}), test::f32(rstd, {n}), test::f32(x, {n, d}), test::f32(w, {d}), 1e-5f);
  cpu.rmsnorm_backward(test::f32(dx, {n, d}), test::f32(dw_fresh, {d}), test::f32(g, {n, d}), test::f32(x, {n, d}),
                       test::f32(w, {d}), test::f32(rstd, {n}));
  // Accumulation onto an existing gradient, with dx written over dout.
  auto dw = random_floats(d, 9);
  const auto dw_before = dw;
  auto g_then_dx = g;
  cpu.rmsnorm_backward(test::f32(g_then_dx, {n, d}), test::f32(dw, {d}), test::f32(g_then_dx, {n, d}),
                       test::f32(x, {n, d}), test::f32(w, {d}), test::f32(rstd, {n}));
  for (int c = 0; c < d; ++c) EXPECT_EQ(dw[c], dw_before[c] + dw_fresh[c]);
  EXPECT_TRUE(test::same_bits(g_then_dx, dx));
}

TEST(CpuRmsNorm, WeightGradientHasTheSameBitsForEveryThreadCount) {
  const int n = 500, d = 200;
  auto x = random_floats(n * d, 10), w = random_floats(d, 11), g = random_floats(n * d, 12);
  std::vector<float> out(x.size()), rstd(n);
  CpuBackend(1).rmsnorm_forward(test::f32(out, {n, d}), test::f32(rstd, {n}), test::f32(x, {n, d}), test::f32(w, {d}),
                                1e-5f);
  std::vector<std::vector<float>> dws, dxs;
  for (int threads : {1, 2, 3, 2}) {
    std::vector<float> dx(x.size()), dw(d, 0.0f);
    CpuBackend(threads).rmsnorm_backward(test::f32(dx, {n, d}), test::f32(dw, {d}), test::f32(g, {n, d}),
                                         test::f32(x, {n, d}), test::f32(w, {d}), test::f32(rstd, {n}));
    dws.push_back(dw);
    dxs.push_back(dx);
  }
  for (std::size_t k = 1; k < dws.size(); ++k) {
    EXPECT_TRUE(test::same_bits(dws[k], dws[0]));
    EXPECT_TRUE(test::same_bits(dxs[k], dxs[0]));
  }
}

}  // namespace
}  // namespace ustrain
