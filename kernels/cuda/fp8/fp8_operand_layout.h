// How an FP8 GEMM operand is laid out for cuBLASLt on Hopper, and where its scales go.
//
// Hopper's FP8 GEMMs take both operands K-major ("TN"): an operand is a row-major (outer, K)
// matrix of FP8 codes, K contiguous. Its scale groups tile that matrix (kernels/fp8/fp8_scaling.h
// names them per recipe):
//   tensor  one group (delayed and current scaling)       cuBLASLt SCALAR_32F
//   row     one group per row, (1, K)  (rowwise)          cuBLASLt OUTER_VEC_32F
//   vec128  (1, 128) groups along K    (blockwise act/grad)  cuBLASLt VEC128_32F
//   blk128  (128, 128) blocks          (blockwise weights)   cuBLASLt BLK128x128_32F
// The quantising kernels keep a group's amax and scale in the "natural" grid, row-major over
// (outer groups, K groups); cuBLASLt takes the inverse scales (it multiplies by them) in the
// layout of its scale mode (cuBLAS documentation, "Scaling factors layouts"):
//   SCALAR_32F       one float;
//   OUTER_VEC_32F    a vector of `outer` floats;
//   VEC128_32F       (outer, L) outer-major: group (o, b) at b * outer + o, L = ceil(K / 128);
//   BLK128x128_32F   K-major (L4, ceil(outer / 128)), L4 = L rounded up to a multiple of 4:
//                    block (p, b) at p * L4 + b (the padding floats are unused).
// Hopper combines VEC128 x VEC128, VEC128 x BLK128x128 and BLK128x128 x VEC128 (not two
// BLK128x128), and OUTER_VEC x OUTER_VEC; the M and N of block and vector modes must be
// multiples of 4, and every FP8 matrix dimension 16-byte aligned.
//
// Pure C++ (constexpr, so device code uses it too) so that the layouts are tested without a GPU.
#pragma once

#include <cstdint>

namespace ustrain::cuda {

enum class Fp8Grouping : std::uint8_t { tensor, row, vec128, blk128 };
// kernels/fp8/fp8_format.h's formats, in its order (that header is C++20; .cu files are C++17).
enum class Fp8Format : std::uint8_t { e4m3, e5m2 };

inline constexpr std::int64_t kFp8Block = 128;

constexpr const char* fp8_grouping_name(Fp8Grouping g) {
  switch (g) {
    case Fp8Grouping::tensor: return "tensor";
    case Fp8Grouping::row: return "row";
    case Fp8Grouping::vec128: return "vec128";
    case Fp8Grouping::blk128: return "blk128";
  }
  return "?";
}

struct Fp8OperandShape {
  std::int64_t outer = 0, k = 0;
  Fp8Grouping grouping = Fp8Grouping::tensor;

  constexpr std::int64_t group_outer() const {  // rows of one group
    return grouping == Fp8Grouping::tensor ? at_least_one(outer) : grouping == Fp8Grouping::blk128 ? kFp8Block : 1;
  }
  constexpr std::int64_t group_k() const {  // columns of one group
    return grouping == Fp8Grouping::tensor || grouping == Fp8Grouping::row ? at_least_one(k) : kFp8Block;
  }
  constexpr std::int64_t grid_outer() const { return (outer + group_outer() - 1) / group_outer(); }
  constexpr std::int64_t grid_k() const { return (k + group_k() - 1) / group_k(); }
  constexpr std::int64_t groups() const { return grid_outer() * grid_k(); }
  // The natural-grid index of element (o, kk).
  constexpr std::int64_t group_of(std::int64_t o, std::int64_t kk) const {
    return (o / group_outer()) * grid_k() + kk / group_k();
  }
  // Floats of cuBLASLt's scale tensor, and where the natural group g goes in it.
  constexpr std::int64_t lt_floats() const {
    if (grouping == Fp8Grouping::blk128) return grid_outer() * padded_k_blocks();
    return groups();
  }
  constexpr std::int64_t lt_index(std::int64_t g) const {
    const std::int64_t go = g / grid_k(), gk = g % grid_k();
    switch (grouping) {
      case Fp8Grouping::vec128: return gk * outer + go;
      case Fp8Grouping::blk128: return go * padded_k_blocks() + gk;
      default: return g;
    }
  }
  constexpr std::int64_t padded_k_blocks() const { return (grid_k() + 3) / 4 * 4; }
  static constexpr std::int64_t at_least_one(std::int64_t v) { return v > 0 ? v : 1; }
};

}  // namespace ustrain::cuda
