// The device scratch of an FP8 linear layer's GEMMs on CUDA (kernels/cuda/fp8/fp8_linear.h), as
// pure functions of its shapes: the CUDA code asks its scratch with them, and the memory plan
// sizes the op scratch with them without a GPU (core/step/fp8_layers.h). Plain C++, no CUDA
// headers (and C++20: not for .cu files).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/fp8/fp8_operand_layout.h"
#include "kernels/cuda/scratch_sizes.h"
#include "kernels/fp8/fp8_scaling.h"

namespace ustrain::cuda {

// How `recipe` groups an operand of `role` (K-major): delayed and current one tensor scale,
// rowwise one per row, blockwise 1x128 activations and gradients, 128x128 weights.
inline Fp8Grouping fp8_grouping(fp8::Recipe recipe, fp8::Role role) {
  switch (recipe) {
    case fp8::Recipe::delayed:
    case fp8::Recipe::current: return Fp8Grouping::tensor;
    case fp8::Recipe::rowwise: return Fp8Grouping::row;
    case fp8::Recipe::blockwise: return role == fp8::Role::weight ? Fp8Grouping::blk128 : Fp8Grouping::vec128;
  }
  return Fp8Grouping::tensor;
}

// The K-major shape of the operand quantised from src (rows, cols), transposed or not.
inline Fp8OperandShape fp8_operand_shape(std::int64_t rows, std::int64_t cols, bool transpose, Fp8Grouping g) {
  return {transpose ? cols : rows, transpose ? rows : cols, g};
}

inline std::size_t fp8_float_scratch(std::int64_t n) {
  return round_up_scratch(static_cast<std::size_t>(n) * sizeof(float));
}

// One quantised operand: codes, amaxes, scales and cuBLASLt's inverse scales, each 256-byte
// aligned, in that order.
inline std::size_t fp8_operand_scratch_bytes(const Fp8OperandShape& s) {
  return round_up_scratch(static_cast<std::size_t>(s.outer * s.k)) + 2 * fp8_float_scratch(s.groups()) +
         fp8_float_scratch(s.lt_floats());
}

// The most any of a linear layer's three FP8 GEMMs takes for (N, I, O): two operands each.
inline std::size_t fp8_linear_scratch_bytes(fp8::Recipe recipe, std::int64_t n, std::int64_t in, std::int64_t out) {
  using fp8::Role;
  const auto bytes = [recipe](std::int64_t rows, std::int64_t cols, bool transpose, Role role) {
    return fp8_operand_scratch_bytes(fp8_operand_shape(rows, cols, transpose, fp8_grouping(recipe, role)));
  };
  const std::size_t forward = bytes(out, in, false, Role::weight) + bytes(n, in, false, Role::activation);
  const std::size_t input_grad = bytes(out, in, true, Role::weight) + bytes(n, out, false, Role::gradient);
  const std::size_t weight_grad = bytes(n, in, true, Role::activation) + bytes(n, out, true, Role::gradient);
  return std::max({forward, input_grad, weight_grad});
}

}  // namespace ustrain::cuda
