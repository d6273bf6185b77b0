// RMSNorm over the last dimension: out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_math.h"

namespace ustrain {
namespace {

constexpr std::int64_t kParallelRows = 16;

// sum g[i] * w[i] * x[i] in double.
double weighted_dot(const float* g, const float* w, const float* x, std::int64_t n) {
  double acc[cpu::kLanes] = {};
  std::int64_t i = 0;
  for (; i + cpu::kLanes <= n; i += cpu::kLanes)
    for (int l = 0; l < cpu::kLanes; ++l) acc[l] += static_cast<double>(g[i + l] * w[i + l]) * x[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += static_cast<double>(g[i] * w[i]) * x[i];
  return cpu::combine_lanes(acc);
}

}  // namespace

void CpuBackend::rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) {
  const std::int64_t rows = x.shape.rows();
  const std::int64_t dim = x.shape.last();
  USTRAIN_ASSERT(out.shape == x.shape, "out " + out.shape.str() + " vs x " + x.shape.str());
  USTRAIN_ASSERT(weight.numel() == dim, "weight " + weight.shape.str() + " for width " + std::to_string(dim));
  USTRAIN_ASSERT(rstd.numel() == rows, "rstd " + rstd.shape.str() + " for " + std::to_string(rows) + " rows");
  float* o = out.f32();           // (N, D)
  float* r = rstd.f32();          // (N)
  const float* xp = x.f32();      // (N, D)
  const float* w = weight.f32();  // (D)
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows >= kParallelRows)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* xr = xp + n * dim;
    const float rs = static_cast<float>(1.0 / std::sqrt(cpu::sum_squares(xr, dim) / static_cast<double>(dim) + eps));
    r[n] = rs;
    float* orow = o + n * dim;
    for (std::int64_t c = 0; c < dim; ++c) orow[c] = xr[c] * rs * w[c];
  }
}

void CpuBackend::rmsnorm_backward(Tensor dx, Tensor dweight, Tensor dout, Tensor x, Tensor weight, Tensor rstd) {
  const std::int64_t rows = x.shape.rows();
  const std::int64_t dim = x.shape.last();
  USTRAIN_ASSERT(dx.shape == x.shape && dout.shape == x.shape,
                 "dx " + dx.shape.str() + ", dout " + dout.shape.str() + " vs x " + x.shape.str());
  USTRAIN_ASSERT(weight.numel() == dim && dweight.numel() == dim, "weight/dweight width");
  USTRAIN_ASSERT(rstd.numel() == rows, "rstd " + rstd.shape.str() + " for " + std::to_string(rows) + " rows");
  float* dxp = dx.f32();          // (N, D)
  float* dw = dweight.f32();      // (D)
  const float* g = dout.f32();    // (N, D)
  const float* xp = x.f32();      // (N, D)
  const float* w = weight.f32();  // (D)
  const float* r = rstd.f32();    // (N)

  // dweight first, so that dx may alias dout or x. Column blocks keep the sum over rows in
  // row order on every thread count.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (dim + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) num_threads(threads_) if (blocks > 1 && rows >= kParallelRows)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t c0 = b * kBlock;
    const std::int64_t width = std::min(kBlock, dim - c0);
    double acc[kBlock] = {};
    for (std::int64_t n = 0; n < rows; ++n) {
      const float* gr = g + n * dim + c0;
      const float* xr = xp + n * dim + c0;
      const float rs = r[n];
      for (std::int64_t c = 0; c < width; ++c) acc[c] += static_cast<double>(gr[c] * xr[c] * rs);
    }
    for (std::int64_t c = 0; c < width; ++c) dw[c0 + c] += static_cast<float>(acc[c]);
  }

  // dx = rstd * (w * g - x * rstd^2 * mean(g * w * x))
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows >= kParallelRows)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* gr = g + n * dim;
    const float* xr = xp + n * dim;
    const float rs = r[n];
    const float coef = static_cast<float>(weighted_dot(gr, w, xr, dim) / static_cast<double>(dim)) * rs * rs;
    float* dr = dxp + n * dim;
    for (std::int64_t c = 0; c < dim; ++c) dr[c] = rs * (w[c] * gr[c] - xr[c] * coef);
  }
}

}  // namespace ustrain
