#include "core/distributed/newton_schulz.h"

#include <algorithm>
#include <cmath>

namespace ustrain {
namespace {

// The first `shape.numel()` floats of `t` with that shape.
Tensor as(const Tensor& t, Shape shape) {
  USTRAIN_ASSERT(t.numel() >= shape.numel(), "Newton-Schulz scratch is too small");
  return Tensor(t.data, shape, DType::f32, t.device);
}

}  // namespace

void newton_schulz(Backend& backend, Tensor x, std::int64_t rows, std::int64_t cols, int steps,
                   const NewtonSchulzScratch& scratch) {
  const std::int64_t k = std::min(rows, cols);
  const bool wide = rows <= cols;  // A = X X^T; else A = X^T X (the transposed iteration)
  const Tensor X = as(x, Shape{rows, cols});
  const Tensor A = as(scratch.a, Shape{k, k}), B = as(scratch.b, Shape{k, k}), Y = as(scratch.y, Shape{rows, cols});
  const double norm = std::sqrt(backend.sum_of_squares(X));
  backend.scale(X, static_cast<float>(1.0 / (norm + kNewtonSchulzNormEps)));
  for (int i = 0; i < steps; ++i) {
    if (wide) {
      backend.linear_forward(A, X, X);  // A (k, k) = X X^T
    } else {
      backend.fill(A, 0.0f);
      backend.linear_backward_weight(A, X, X);  // A (k, k) += X^T X
    }
    backend.linear_forward(B, A, A);  // B (k, k) = A A^T = A^2 (A is symmetric)
    backend.scale(B, kNewtonSchulzC);
    backend.scale(A, kNewtonSchulzB);
    backend.add(B, B, A);  // B = b A + c A^2, symmetric
    if (wide)
      backend.linear_backward_input(Y, B, X);  // Y (rows, cols) = B X
    else
      backend.linear_forward(Y, X, B);  // Y (rows, cols) = X B^T = X B
    backend.scale(X, kNewtonSchulzA);
    backend.add(X, X, Y);
  }
}

}  // namespace ustrain
