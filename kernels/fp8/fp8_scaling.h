// How a GEMM operand is scaled into FP8 (kernels/fp8/fp8_format.h) for the four scaling
// recipes of train.fp8_recipe, and the quantise-dequantise that models an FP8 GEMM's inputs:
// q = saturate(round(x * scale)) in the operand's format, then q / scale (as q * (1/scale) in
// fp32, as a GPU applies its inverse scale).
//
// A scale maps a group's amax (largest |x|) onto the format's largest value:
// scale = max_finite / amax / 2^margin; a group whose amax is 0 or not finite keeps its
// previous scale (1 at first), as TransformerEngine does. Groups, per recipe:
//   delayed    one scale per tensor, from the amax history of earlier steps (DelayedScaling)
//   current    one scale per tensor, from this tensor's amax
//   rowwise    one scale per row along the GEMM's reduction (K) axis, a power of two
//              (torchao's rowwise recipe)
//   blockwise  activations and gradients: 1x128 tiles along K; weights: 128x128 blocks;
//              powers of two (DeepSeek-V3's recipe)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/fp8/fp8_format.h"

namespace ustrain::fp8 {

enum class Recipe : std::uint8_t { delayed, current, rowwise, blockwise };
// Which kind of tensor an operand is: its format and (blockwise) its grouping follow from it.
enum class Role : std::uint8_t { activation, weight, gradient };
inline constexpr int kRoles = 3;

struct Config {
  Recipe recipe = Recipe::delayed;
  Format grad_format = Format::e5m2;  // activations and weights are e4m3
  int history = 1024;                 // delayed: steps of amax history
  int margin = 0;                     // scale divided by 2^margin
};

Recipe recipe_named(const std::string& name);  // "delayed" | "current" | "rowwise" | "blockwise"
const char* recipe_name(Recipe r);
Format format_of(const Config& c, Role r);
inline constexpr std::int64_t kBlock = 128;  // blockwise tile and block edge

// The scale for `amax` (see above); `previous` when amax is 0 or not finite. Capped at the
// largest float.
float scale_for_amax(float amax, Format f, int margin, float previous);
// The largest power of two at most s (s > 0, finite).
float power_of_two_at_most(float s);

// One GEMM operand: a row-major (rows, cols) fp32 matrix whose reduction axis is its columns
// (k_in_cols) or its rows.
struct Operand {
  const float* data = nullptr;
  std::int64_t rows = 0, cols = 0;
  bool k_in_cols = true;
  Role role = Role::activation;
};

// The scales of an operand: one per (block_rows, block_cols) block of its matrix (the last
// blocks of a row or column may be partial), row-major over the grid.
struct ScaleGrid {
  std::int64_t block_rows = 1, block_cols = 1, grid_rows = 1, grid_cols = 1;
  std::vector<float> scales;
  float at(std::int64_t r, std::int64_t c) const {
    return scales[static_cast<std::size_t>((r / block_rows) * grid_cols + c / block_cols)];
  }
};

// The block shape a recipe groups an operand by (delayed and current: the whole matrix).
ScaleGrid grid_shape(Recipe recipe, const Operand& op);
// Largest |x| of every block of the grid (NaN ignored).
std::vector<float> block_amax(const Operand& op, const ScaleGrid& grid);
// The scales of a recipe that needs no state (current, rowwise, blockwise), from op's values.
ScaleGrid scales_now(const Config& c, const Operand& op);
// One scale for the whole operand (delayed: the state's).
ScaleGrid tensor_scale(const Operand& op, float scale);

// out (rows, cols) = the FP8 values op quantises to, dequantised: saturating, in the role's format.
void quantize_dequantize(float* out, const Operand& op, const ScaleGrid& grid, Format f);

}  // namespace ustrain::fp8
