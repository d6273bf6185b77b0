// The three GEMMs of a linear layer as column-major BLAS calls.
//
// The backend stores everything row-major (weight (O, I) as Hugging Face does); cuBLASLt is
// column-major. A row-major (r, c) matrix with row stride c is, byte for byte, a
// column-major (c, r) matrix with leading dimension c, i.e. its transpose. So each row-major
// product C = X @ Y is issued as the column-major product C^T = Y^T @ X^T, and every
// operand is passed in place: no copies, no explicit transposes.
//
// Pure C++ so that the mapping is tested on machines without a GPU.
#pragma once

#include <cstdint>

namespace ustrain::cuda {

// The named inputs of a linear layer's GEMMs.
enum class LinearOperand : std::uint8_t { x, weight, dout };

// One column-major call: D (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C, C = D.
struct GemmCall {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  LinearOperand a = LinearOperand::x, b = LinearOperand::x;

  // A and B as stored, before op(): (rows, cols) column-major, rows <= leading dimension.
  std::int64_t a_rows() const { return trans_a ? k : m; }
  std::int64_t a_cols() const { return trans_a ? m : k; }
  std::int64_t b_rows() const { return trans_b ? n : k; }
  std::int64_t b_cols() const { return trans_b ? k : n; }
};

// out (N, O) = x (N, I) @ w (O, I)^T, overwritten.
// Column-major: out^T (O, N) = w (O, I) @ x^T (I, N); w is stored as w^T (I, O), so op(A) = T.
inline GemmCall plan_linear_forward(std::int64_t N, std::int64_t I, std::int64_t O) {
  GemmCall c;
  c.trans_a = true;  // A = w^T (I, O) stored, op(A) = w (O, I)
  c.trans_b = false;  // B = x^T (I, N)
  c.m = O, c.n = N, c.k = I;
  c.lda = I, c.ldb = I, c.ldc = O;
  c.alpha = 1.0f, c.beta = 0.0f;
  c.a = LinearOperand::weight, c.b = LinearOperand::x;
  return c;
}

// dx (N, I) = dout (N, O) @ w (O, I), overwritten.
// Column-major: dx^T (I, N) = w^T (I, O) @ dout^T (O, N).
inline GemmCall plan_linear_backward_input(std::int64_t N, std::int64_t I, std::int64_t O) {
  GemmCall c;
  c.trans_a = false;  // A = w^T (I, O)
  c.trans_b = false;  // B = dout^T (O, N)
  c.m = I, c.n = N, c.k = O;
  c.lda = I, c.ldb = O, c.ldc = I;
  c.alpha = 1.0f, c.beta = 0.0f;
  c.a = LinearOperand::weight, c.b = LinearOperand::dout;
  return c;
}

// dw (O, I) += dout (N, O)^T @ x (N, I), accumulated (beta = 1).
// Column-major: dw^T (I, O) += x^T (I, N) @ dout (N, O); dout is stored as dout^T (O, N).
inline GemmCall plan_linear_backward_weight(std::int64_t N, std::int64_t I, std::int64_t O) {
  GemmCall c;
  c.trans_a = false;  // A = x^T (I, N)
  c.trans_b = true;  // B = dout^T (O, N) stored, op(B) = dout (N, O)
  c.m = I, c.n = O, c.k = N;
  c.lda = I, c.ldb = O, c.ldc = I;
  c.alpha = 1.0f, c.beta = 1.0f;
  c.a = LinearOperand::x, c.b = LinearOperand::dout;
  return c;
}

}  // namespace ustrain::cuda
