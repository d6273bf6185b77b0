#include "kernels/fp8/fp8_scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/error.h"

namespace ustrain::fp8 {
namespace {

// Below this many elements one thread works: waking the team costs more.
constexpr std::int64_t kParallelMin = 1 << 15;

}  // namespace

Recipe recipe_named(const std::string& name) {
  if (name == "delayed") return Recipe::delayed;
  if (name == "current") return Recipe::current;
  if (name == "rowwise") return Recipe::rowwise;
  USTRAIN_ASSERT(name == "blockwise", "unknown fp8 recipe " + name + "; the recipe check refuses it");
  return Recipe::blockwise;
}

const char* recipe_name(Recipe r) {
  switch (r) {
    case Recipe::delayed: return "delayed";
    case Recipe::current: return "current";
    case Recipe::rowwise: return "rowwise";
    case Recipe::blockwise: return "blockwise";
  }
  return "?";
}

Format format_of(const Config& c, Role r) { return r == Role::gradient ? c.grad_format : Format::e4m3; }

float scale_for_amax(float amax, Format f, int margin, float previous) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return previous;
  const double s = static_cast<double>(max_finite(f)) / static_cast<double>(amax) / std::ldexp(1.0, margin);
  return static_cast<float>(std::min(s, static_cast<double>(std::numeric_limits<float>::max())));
}

float power_of_two_at_most(float s) {
  int e = 0;
  std::frexp(s, &e);  // s = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0f, e - 1);
}

ScaleGrid grid_shape(Recipe recipe, const Operand& op) {
  ScaleGrid g;
  g.block_rows = std::max<std::int64_t>(op.rows, 1);
  g.block_cols = std::max<std::int64_t>(op.cols, 1);
  if (recipe == Recipe::rowwise) {
    (op.k_in_cols ? g.block_rows : g.block_cols) = 1;
  } else if (recipe == Recipe::blockwise) {
    if (op.role == Role::weight) {
      g.block_rows = g.block_cols = kBlock;
    } else if (op.k_in_cols) {
      g.block_rows = 1, g.block_cols = kBlock;
    } else {
      g.block_rows = kBlock, g.block_cols = 1;
    }
  }
  g.grid_rows = (std::max<std::int64_t>(op.rows, 1) + g.block_rows - 1) / g.block_rows;
  g.grid_cols = (std::max<std::int64_t>(op.cols, 1) + g.block_cols - 1) / g.block_cols;
  g.scales.assign(static_cast<std::size_t>(g.grid_rows * g.grid_cols), 1.0f);
  return g;
}

std::vector<float> block_amax(const Operand& op, const ScaleGrid& g) {
  std::vector<float> amax(g.scales.size(), 0.0f);
  // Each thread takes whole grid rows, so no two write the same block.
#pragma omp parallel for schedule(static) if (op.rows * op.cols >= kParallelMin)
  for (std::int64_t gr = 0; gr < g.grid_rows; ++gr) {
    const std::int64_t r_end = std::min(op.rows, (gr + 1) * g.block_rows);
    for (std::int64_t r = gr * g.block_rows; r < r_end; ++r) {
      const float* row = op.data + r * op.cols;
      if (g.block_cols == 1) {  // a block per column
        float* m = amax.data() + gr * g.grid_cols;
        for (std::int64_t c = 0; c < op.cols; ++c) {
          const float a = std::fabs(row[c]);
          m[c] = a > m[c] ? a : m[c];  // NaN ignored
        }
        continue;
      }
      for (std::int64_t gc = 0; gc < g.grid_cols; ++gc) {
        const std::int64_t c_end = std::min(op.cols, (gc + 1) * g.block_cols);
        float m = amax[static_cast<std::size_t>(gr * g.grid_cols + gc)];
        for (std::int64_t c = gc * g.block_cols; c < c_end; ++c) {
          const float a = std::fabs(row[c]);
          m = a > m ? a : m;  // NaN ignored
        }
        amax[static_cast<std::size_t>(gr * g.grid_cols + gc)] = m;
      }
    }
  }
  return amax;
}

ScaleGrid scales_now(const Config& c, const Operand& op) {
  USTRAIN_ASSERT(c.recipe != Recipe::delayed, "delayed scaling takes its scale from its amax history");
  ScaleGrid g = grid_shape(c.recipe, op);
  const std::vector<float> amax = block_amax(op, g);
  const Format f = format_of(c, op.role);
  for (std::size_t i = 0; i < amax.size(); ++i) {
    float s = scale_for_amax(amax[i], f, c.margin, 1.0f);
    if (c.recipe != Recipe::current) s = power_of_two_at_most(s);
    g.scales[i] = s;
  }
  return g;
}

ScaleGrid tensor_scale(const Operand& op, float scale) {
  ScaleGrid g = grid_shape(Recipe::current, op);
  g.scales[0] = scale;
  return g;
}

namespace {

template <Format F>
void quantize_dequantize_as(float* out, const Operand& op, const ScaleGrid& g, const std::vector<float>& inverse) {
#pragma omp parallel for schedule(static) if (op.rows * op.cols >= kParallelMin)
  for (std::int64_t r = 0; r < op.rows; ++r) {
    const float* x = op.data + r * op.cols;
    float* y = out + r * op.cols;
    const std::int64_t base = (r / g.block_rows) * g.grid_cols;
    if (g.block_cols == 1) {  // a scale per column (the reduction axis runs down the rows)
      const float* s = g.scales.data() + base;
      const float* inv = inverse.data() + base;
#pragma omp simd
      for (std::int64_t c = 0; c < op.cols; ++c) y[c] = round_saturating<F>(x[c] * s[c]) * inv[c];
      continue;
    }
    for (std::int64_t c0 = 0; c0 < op.cols; c0 += g.block_cols) {  // one block's stretch of the row
      const auto b = static_cast<std::size_t>(base + c0 / g.block_cols);
      const float s = g.scales[b], inv = inverse[b];
      const std::int64_t c1 = std::min(op.cols, c0 + g.block_cols);
#pragma omp simd
      for (std::int64_t c = c0; c < c1; ++c) y[c] = round_saturating<F>(x[c] * s) * inv;
    }
  }
}

}  // namespace

void quantize_dequantize(float* out, const Operand& op, const ScaleGrid& g, Format f) {
  std::vector<float> inverse(g.scales.size());
  for (std::size_t i = 0; i < inverse.size(); ++i) inverse[i] = 1.0f / g.scales[i];
  if (f == Format::e4m3) quantize_dequantize_as<Format::e4m3>(out, op, g, inverse);
  else quantize_dequantize_as<Format::e5m2>(out, op, g, inverse);
}

}  // namespace ustrain::fp8
