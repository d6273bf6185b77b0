// Muon: Newton-Schulz on the backend against a float64 iteration written out here, and one
// Muon step over a store against the formula (AdamW for what Muon does not take).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/distributed/muon_optimizer.h"
#include "tests/unit/kernels/reference.h"
#include "parallel/comm/self_communicator.h"

namespace ustrain {
namespace {

using Matrix = std::vector<double>;  // row-major

Matrix transpose(const Matrix& x, std::int64_t rows, std::int64_t cols) {
  Matrix t(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) t[static_cast<std::size_t>(c * rows + r)] = x[static_cast<std::size_t>(r * cols + c)];
  return t;
}

// (n, k) x (k, m)
Matrix product(const Matrix& a, const Matrix& b, std::int64_t n, std::int64_t k, std::int64_t m) {
  Matrix out(static_cast<std::size_t>(n * m), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t l = 0; l < k; ++l)
        out[static_cast<std::size_t>(i * m + j)] += a[static_cast<std::size_t>(i * k + l)] * b[static_cast<std::size_t>(l * m + j)];
  return out;
}

}  // namespace

// The iteration as published, in float64: on the transpose when rows > cols,
// X <- a X + (b A + c A A) X. (Also the Muon step test's reference.)
std::vector<double> newton_schulz_float64(std::vector<double> x, std::int64_t rows, std::int64_t cols, int steps) {
  const bool tall = rows > cols;
  if (tall) x = transpose(x, rows, cols), std::swap(rows, cols);
  double norm = 0;
  for (double v : x) norm += v * v;
  for (double& v : x) v /= std::sqrt(norm) + 1e-7;
  for (int s = 0; s < steps; ++s) {
    const Matrix a = product(x, transpose(x, rows, cols), rows, cols, rows);
    const Matrix aa = product(a, a, rows, rows, rows);
    Matrix b(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) b[i] = -4.7750 * a[i] + 2.0315 * aa[i];
    const Matrix bx = product(b, x, rows, rows, cols);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 3.4445 * x[i] + bx[i];
  }
  return tall ? transpose(x, rows, cols) : x;
}

namespace {

std::vector<float> run_newton_schulz(std::vector<float> u, std::int64_t rows, std::int64_t cols, int steps) {
  CpuBackend cpu(1);
  const std::int64_t k = std::min(rows, cols);
  std::vector<float> a(static_cast<std::size_t>(k * k)), b(a.size()), y(u.size());
  newton_schulz(cpu, Tensor(u.data(), Shape{rows * cols}), rows, cols, steps,
                {Tensor(a.data(), Shape{k * k}), Tensor(b.data(), Shape{k * k}), Tensor(y.data(), Shape{rows * cols})});
  return u;
}

double max_difference(const std::vector<float>& got, const Matrix& want) {
  double d = 0;
  for (std::size_t i = 0; i < got.size(); ++i) d = std::max(d, std::abs(got[i] - want[i]));
  return d;
}

TEST(NewtonSchulz, MatchesTheFloat64IterationOnSquareTallAndWideMatrices) {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{16, 16}, {24, 8}, {8, 24}, {1, 5}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    const std::vector<float> u = test::random_floats(static_cast<std::size_t>(rows * cols), 7);
    const std::vector<float> got = run_newton_schulz(u, rows, cols, 5);
    const Matrix want = newton_schulz_float64(test::to_double(u), rows, cols, 5);
    EXPECT_LT(max_difference(got, want), 5e-6);  // fp32 GEMMs: about 1e-6 measured
    // Five steps bring the singular values near 1: the Frobenius norm near sqrt(min(rows, cols)).
    double norm = 0;
    for (double v : want) norm += v * v;
    EXPECT_NEAR(std::sqrt(norm / static_cast<double>(std::min(rows, cols))), 1.0, 0.35);
  }
}

TEST(NewtonSchulz, AZeroUpdateStaysZero) {
  const std::vector<float> got = run_newton_schulz(std::vector<float>(12 * 5, 0.0f), 12, 5, 5);
  for (float v : got) ASSERT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace ustrain
