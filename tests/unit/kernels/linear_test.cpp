// Linear (weight (O, I)): forward against float64, backward against finite differences.
#include <gtest/gtest.h>

#include "tests/unit/kernels/reference.h"

namespace ustrain {
namespace {

using test::random_floats;

// out (N, O) = x (N, I) @ w (O, I)^T
std::vector<double> linear_ref(const std::vector<double>& x, const std::vector<double>& w, int n, int in, int out) {
  std::vector<double> y(static_cast<std::size_t>(n * out));
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double s = 0.0;
      for (int k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
  return y;
}

struct Case {
  int n, in, out;
};
const Case kCases[] = {{1, 1, 1}, {1, 13, 7}, {7, 13, 11}, {37, 17, 65}, {64, 32, 48}};

TEST(CpuLinear, ForwardMatchesFloat64) {
  CpuBackend cpu(2);
  for (auto [n, in, out] : kCases) {
    auto x = random_floats(static_cast<std::size_t>(n * in), 1);
    auto w = random_floats(static_cast<std::size_t>(out * in), 2);
    std::vector<float> y(static_cast<std::size_t>(n * out));
    cpu.linear_forward(test::f32(y, {n, out}), test::f32(x, {n, in}), test::f32(w, {out, in}));
    EXPECT_LT(test::rel_error(y, linear_ref(test::to_double(x), test::to_double(w), n, in, out)), test::kForwardTol)
        << n << " " << in << " " << out;
  }
}

TEST(CpuLinear, BackwardMatchesFiniteDifferences) {
  CpuBackend cpu(2);
  for (auto [n, in, out] : kCases) {
    auto x = random_floats(static_cast<std::size_t>(n * in), 3);
    auto w = random_floats(static_cast<std::size_t>(out * in), 4);
    auto r = random_floats(static_cast<std::size_t>(n * out), 5);
    std::vector<float> dx(x.size()), dw(w.size(), 0.0f);
    cpu.linear_backward(test::f32(dx, {n, in}), test::f32(dw, {out, in}), test::f32(r, {n, out}), test::f32(x, {n, in}),
                        test::f32(w, {out, in}));
    const auto xd = test::to_double(x), wd = test::to_double(w), rd = test::to_double(r);
    const auto want_dx = test::numeric_gradient(
        [&](const std::vector<double>& v) { return test::weighted_sum(linear_ref(v, wd, n, in, out), rd); }, xd);
    const auto want_dw = test::numeric_gradient(
        [&](const std::vector<double>& v) { return test::weighted_sum(linear_ref(xd, v, n, in, out), rd); }, wd);
    EXPECT_LT(test::rel_error(dx, want_dx), test::kBackwardTol) << n << " " << in << " " << out;
    EXPECT_LT(test::rel_error(dw, want_dw), test::kBackwardTol) << n << " " << in << " " << out;
  }
}

TEST(CpuLinear, BackwardAccumulatesWeightGradientAndSkipsEmptyDx) {
  CpuBackend cpu(2);
  const int n = 5, in = 6, out = 3;
  auto x = random_floats(n * in, 6), w = random_floats(out * in, 7), g = random_floats(n * out, 8);
  std::vector<float> dx(x.size()), fresh(w.size(), 0.0f);
  cpu.linear_backward(test::f32(dx, {n, in}), test::f32(fresh, {out, in}), test::f32(g, {n, out}),
                      test::f32(x, {n, in}), test::f32(w, {out, in}));
  auto dw = random_floats(w.size(), 9);
  std::vector<double> want(dw.size());
  for (std::size_t k = 0; k < dw.size(); ++k) want[k] = static_cast<double>(dw[k]) + fresh[k];
  cpu.linear_backward(Tensor(), test::f32(dw, {out, in}), test::f32(g, {n, out}), test::f32(x, {n, in}),
                      test::f32(w, {out, in}));
  EXPECT_LT(test::rel_error(dw, want), test::kForwardTol);
}

// Shapes large enough for the GEMMs to be split across threads, by rows and by columns.
TEST(CpuLinear, SplitGemmsMatchFloat64ForEveryThreadCount) {
  for (auto [n, in, out] : {Case{130, 67, 97}, Case{20, 64, 300}}) {
    auto x = random_floats(static_cast<std::size_t>(n * in), 12);
    auto w = random_floats(static_cast<std::size_t>(out * in), 13);
    auto g = random_floats(static_cast<std::size_t>(n * out), 14);
    const auto xd = test::to_double(x), wd = test::to_double(w), gd = test::to_double(g);
    const auto want_y = linear_ref(xd, wd, n, in, out);
    std::vector<double> want_dx(x.size(), 0.0), want_dw(w.size(), 0.0);
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < out; ++o)
        for (int k = 0; k < in; ++k) {
          want_dx[static_cast<std::size_t>(i * in + k)] +=
              gd[static_cast<std::size_t>(i * out + o)] * wd[static_cast<std::size_t>(o * in + k)];
          want_dw[static_cast<std::size_t>(o * in + k)] +=
              gd[static_cast<std::size_t>(i * out + o)] * xd[static_cast<std::size_t>(i * in + k)];
        }
    for (int threads : {1, 2, 3}) {
      CpuBackend cpu(threads);
      std::vector<float> y(g.size()), dx(x.size()), dw(w.size(), 0.0f);
      cpu.linear_forward(test::f32(y, {n, out}), test::f32(x, {n, in}), test::f32(w, {out, in}));
      cpu.linear_backward(test::f32(dx, {n, in}), test::f32(dw, {out, in}), test::f32(g, {n, out}),
                          test::f32(x, {n, in}), test::f32(w, {out, in}));
      EXPECT_LT(test::rel_error(y, want_y), test::kForwardTol) << n << " " << in << " " << out << " t" << threads;
      EXPECT_LT(test::rel_error(dx, want_dx), test::kForwardTol) << n << " " << in << " " << out << " t" << threads;
      EXPECT_LT(test::rel_error(dw, want_dw), test::kForwardTol) << n << " " << in << " " << out << " t" << threads;
    }
  }
}

TEST(CpuLinear, AcceptsBatchAndSequenceDimensions) {
  CpuBackend cpu(1);
  const int b = 2, s = 3, in = 5, out = 4;
  auto x = random_floats(b * s * in, 10), w = random_floats(out * in, 11);
  std::vector<float> y(b * s * out);
  cpu.linear_forward(test::f32(y, {b, s, out}), test::f32(x, {b, s, in}), test::f32(w, {out, in}));
  EXPECT_LT(test::rel_error(y, linear_ref(test::to_double(x), test::to_double(w), b * s, in, out)), test::kForwardTol);
}

}  // namespace
}  // namespace ustrain
