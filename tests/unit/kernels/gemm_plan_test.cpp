// The row-major linear GEMMs mapped onto column-major calls (kernels/cuda/gemm/gemm_plan.h):
// each plan is executed by a naive column-major GEMM and compared with the row-major
// definition computed directly. Runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/gemm/gemm_plan.h"

namespace ustrain::cuda {
namespace {

using Matrix = std::vector<float>;

// Distinct, exactly representable values, so that sums in any order agree closely.
Matrix pattern(std::int64_t count, int seed) {
  Matrix m(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i)
    m[static_cast<std::size_t>(i)] = static_cast<float>((i * 7 + seed * 13) % 23 - 11) * 0.125f;
  return m;
}

// Bounds-checked, so that a wrong plan fails the test instead of corrupting memory.
float at(const Matrix& m, std::int64_t i) { return m.at(static_cast<std::size_t>(i)); }

// Column-major reference: C (m, n) = alpha * op(A) @ op(B) + beta * C, element (i, j) at i + j * ld.
void column_major_gemm(const GemmCall& g, const Matrix& a, const Matrix& b, Matrix& c) {
  for (std::int64_t j = 0; j < g.n; ++j) {
    for (std::int64_t i = 0; i < g.m; ++i) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < g.k; ++p) {
        const float av = g.trans_a ? at(a, p + i * g.lda) : at(a, i + p * g.lda);
        const float bv = g.trans_b ? at(b, j + p * g.ldb) : at(b, p + j * g.ldb);
        sum += static_cast<double>(av) * bv;
      }
      float& out = c.at(static_cast<std::size_t>(i + j * g.ldc));
      out = static_cast<float>(g.alpha * sum + g.beta * static_cast<double>(out));
    }
  }
}

// The stored extent of an operand (rows, cols) must cover exactly the buffer it points at.
void expect_covers(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t numel) {
  EXPECT_GE(ld, rows);
  EXPECT_EQ(ld * cols, numel);
}

struct LinearBuffers {
  std::int64_t N, I, O;
  Matrix x, w, dout;
  const Matrix& operand(LinearOperand which) const {
    switch (which) {
      case LinearOperand::x: return x;
      case LinearOperand::weight: return w;
      case LinearOperand::dout: return dout;
    }
    return x;
  }
};

LinearBuffers make_buffers(std::int64_t N, std::int64_t I, std::int64_t O) {
  return {N, I, O, pattern(N * I, 1), pattern(O * I, 2), pattern(N * O, 3)};
}

// Runs a plan on the buffers, checking that every operand's stored shape fits its buffer.
void run_plan(const GemmCall& g, const LinearBuffers& bufs, Matrix& c) {
  const Matrix& a = bufs.operand(g.a);
  const Matrix& b = bufs.operand(g.b);
  expect_covers(g.a_rows(), g.a_cols(), g.lda, static_cast<std::int64_t>(a.size()));
  expect_covers(g.b_rows(), g.b_cols(), g.ldb, static_cast<std::int64_t>(b.size()));
  expect_covers(g.m, g.n, g.ldc, static_cast<std::int64_t>(c.size()));
  column_major_gemm(g, a, b, c);
}

void expect_same(const Matrix& got, const Matrix& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

struct Sizes {
  std::int64_t N, I, O;
};

const Sizes kSizes[] = {{5, 7, 3}, {1, 1, 1}, {3, 1, 4}, {1, 6, 1}, {9, 4, 11}, {2, 13, 5}};

TEST(GemmPlan, ForwardMatchesRowMajorDefinition) {
  for (const Sizes& s : kSizes) {
    SCOPED_TRACE(::testing::Message() << "N=" << s.N << " I=" << s.I << " O=" << s.O);
    const LinearBuffers bufs = make_buffers(s.N, s.I, s.O);
    // out (N, O) = x (N, I) @ w (O, I)^T
    Matrix want(static_cast<std::size_t>(s.N * s.O));
    for (std::int64_t r = 0; r < s.N; ++r)
      for (std::int64_t o = 0; o < s.O; ++o) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < s.I; ++i)
          sum += static_cast<double>(at(bufs.x, r * s.I + i)) * at(bufs.w, o * s.I + i);
        want[static_cast<std::size_t>(r * s.O + o)] = static_cast<float>(sum);
      }
    Matrix got(want.size(), 99.0f);  // garbage: the forward overwrites
    const GemmCall g = plan_linear_forward(s.N, s.I, s.O);
    EXPECT_EQ(g.beta, 0.0f);
    run_plan(g, bufs, got);
    expect_same(got, want);
  }
}

TEST(GemmPlan, BackwardInputMatchesRowMajorDefinition) {
  for (const Sizes& s : kSizes) {
    SCOPED_TRACE(::testing::Message() << "N=" << s.N << " I=" << s.I << " O=" << s.O);
    const LinearBuffers bufs = make_buffers(s.N, s.I, s.O);
    // dx (N, I) = dout (N, O) @ w (O, I)
    Matrix want(static_cast<std::size_t>(s.N * s.I));
    for (std::int64_t r = 0; r < s.N; ++r)
      for (std::int64_t i = 0; i < s.I; ++i) {
        double sum = 0.0;
        for (std::int64_t o = 0; o < s.O; ++o)
          sum += static_cast<double>(at(bufs.dout, r * s.O + o)) * at(bufs.w, o * s.I + i);
        want[static_cast<std::size_t>(r * s.I + i)] = static_cast<float>(sum);
      }
    Matrix got(want.size(), -7.0f);  // garbage: dx is overwritten
    const GemmCall g = plan_linear_backward_input(s.N, s.I, s.O);
    EXPECT_EQ(g.beta, 0.0f);
    run_plan(g, bufs, got);
    expect_same(got, want);
  }
}

TEST(GemmPlan, BackwardWeightAccumulatesRowMajorDefinition) {
  for (const Sizes& s : kSizes) {
    SCOPED_TRACE(::testing::Message() << "N=" << s.N << " I=" << s.I << " O=" << s.O);
    const LinearBuffers bufs = make_buffers(s.N, s.I, s.O);
    const Matrix before = pattern(s.O * s.I, 4);  // gradient from an earlier micro-batch
    // dw (O, I) += dout (N, O)^T @ x (N, I)
    Matrix want = before;
    for (std::int64_t o = 0; o < s.O; ++o)
      for (std::int64_t i = 0; i < s.I; ++i) {
        double sum = 0.0;
        for (std::int64_t r = 0; r < s.N; ++r)
          sum += static_cast<double>(at(bufs.dout, r * s.O + o)) * at(bufs.x, r * s.I + i);
        want[static_cast<std::size_t>(o * s.I + i)] += static_cast<float>(sum);
      }
    Matrix got = before;
    const GemmCall g = plan_linear_backward_weight(s.N, s.I, s.O);
    EXPECT_EQ(g.beta, 1.0f);
    run_plan(g, bufs, got);
    expect_same(got, want);

    // A second micro-batch adds the same product again.
    for (std::size_t e = 0; e < want.size(); ++e) want[e] += want[e] - before[e];
    run_plan(g, bufs, got);
    expect_same(got, want);
  }
}

TEST(GemmPlan, OperandsAndTransposesAreTheExpectedOnes) {
  const GemmCall fwd = plan_linear_forward(5, 7, 3);
  EXPECT_TRUE(fwd.trans_a);
  EXPECT_FALSE(fwd.trans_b);
  EXPECT_EQ(fwd.a, LinearOperand::weight);
  EXPECT_EQ(fwd.b, LinearOperand::x);
  EXPECT_EQ(fwd.m, 3);
  EXPECT_EQ(fwd.n, 5);
  EXPECT_EQ(fwd.k, 7);

  const GemmCall dx = plan_linear_backward_input(5, 7, 3);
  EXPECT_FALSE(dx.trans_a);
  EXPECT_FALSE(dx.trans_b);
  EXPECT_EQ(dx.a, LinearOperand::weight);
  EXPECT_EQ(dx.b, LinearOperand::dout);

  const GemmCall dw = plan_linear_backward_weight(5, 7, 3);
  EXPECT_FALSE(dw.trans_a);
  EXPECT_TRUE(dw.trans_b);
  EXPECT_EQ(dw.a, LinearOperand::x);
  EXPECT_EQ(dw.b, LinearOperand::dout);
  EXPECT_EQ(dw.k, 5);  // the reduction runs over the token rows
}

}  // namespace
}  // namespace ustrain::cuda
