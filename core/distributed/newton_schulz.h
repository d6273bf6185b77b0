// The Newton-Schulz iteration Muon orthogonalizes its updates with, on backend ops (GEMMs
// through the backend's linear ops, in fp32): X0 = U / (||U||_F + 1e-7), then `steps` times
// X <- a X + (b A + c A^2) X with A = X X^T, (a, b, c) = (3.4445, -4.7750, 2.0315). A tall
// matrix (rows > cols) iterates on its transpose, written as X <- a X + X (b A + c A^2) with
// A = X^T X, so that no transpose is ever formed.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace ustrain {

inline constexpr float kNewtonSchulzA = 3.4445f, kNewtonSchulzB = -4.7750f, kNewtonSchulzC = 2.0315f;
inline constexpr double kNewtonSchulzNormEps = 1e-7;

// Scratch for one matrix of shape (rows, cols): fp32, on the backend's device.
struct NewtonSchulzScratch {
  Tensor a, b;  // at least k * k floats each, k = min(rows, cols)
  Tensor y;     // at least rows * cols floats
};

// x: rows * cols floats (row-major), U on entry and the orthogonalized X on return.
void newton_schulz(Backend& backend, Tensor x, std::int64_t rows, std::int64_t cols, int steps,
                   const NewtonSchulzScratch& scratch);

}  // namespace ustrain
