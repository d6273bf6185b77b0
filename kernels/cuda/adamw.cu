// Multi-tensor AdamW. Up to kSegmentsPerLaunch parameter tensors go to one launch as a
// table passed by value (kernel parameters live in constant memory, 4 KiB at most); each
// tensor is cut into tiles of kTile elements, and every block updates one tile.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/cuda_check.h"

namespace ustrain::cuda {
namespace {

constexpr int kSegmentsPerLaunch = 32;
constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // elements each thread loads before it computes (memory parallelism)
constexpr int kStepsPerTile = 8;
constexpr std::int64_t kTile = std::int64_t{kThreads} * kUnroll * kStepsPerTile;

struct SegmentTable {
  float* param[kSegmentsPerLaunch];
  const float* grad[kSegmentsPerLaunch];
  float* m[kSegmentsPerLaunch];
  float* v[kSegmentsPerLaunch];
  void* compute_copy[kSegmentsPerLaunch];
  std::int64_t n[kSegmentsPerLaunch];
  // Tiles of segments before s; first_tile[count] is the launch's block count.
  std::int64_t first_tile[kSegmentsPerLaunch + 1];
  float weight_decay[kSegmentsPerLaunch];
  int count;
};

// Everything of the update that does not depend on the element, computed once on the host.
struct Coefficients {
  float lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, grad_scale;
  float inv_bias1, inv_bias2;  // 1 / (1 - beta^step), as the CPU op rounds them
};

static_assert(sizeof(SegmentTable) + sizeof(Coefficients) <= 4000, "kernel parameters are limited to 4 KiB");

__device__ __forceinline__ void store_as(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_as(__nv_bfloat16* p, float x) { *p = __float2bfloat16(x); }
__device__ __forceinline__ void store_as(__half* p, float x) { *p = __float2half(x); }

// Grid: one block per tile of the table's segments. C: the compute-copy element type.
template <class C>
__global__ void __launch_bounds__(kThreads) adamw_kernel(const SegmentTable table, const Coefficients c) {
  const std::int64_t tile = blockIdx.x;
  int s = 0;  // the segment holding this tile; empty segments own no tile and are skipped
  while (s + 1 < table.count && table.first_tile[s + 1] <= tile) ++s;
  const std::int64_t n = table.n[s];
  const std::int64_t begin = (tile - table.first_tile[s]) * kTile;
  const std::int64_t end = begin + kTile < n ? begin + kTile : n;
  float* w = table.param[s];
  const float* grad = table.grad[s];
  float* m = table.m[s];
  float* v = table.v[s];
  C* copy = static_cast<C*>(table.compute_copy[s]);
  const float wd = table.weight_decay[s];

  for (std::int64_t base = begin + threadIdx.x; base < end; base += std::int64_t{kThreads} * kUnroll) {
    float gk[kUnroll], mk[kUnroll], vk[kUnroll], wk[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::int64_t i = base + std::int64_t{k} * kThreads;
      if (i < end) {
        gk[k] = grad[i];
        mk[k] = m[i];
        vk[k] = v[i];
        wk[k] = w[i];
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::int64_t i = base + std::int64_t{k} * kThreads;
      if (i >= end) continue;
      const float g = gk[k] * c.grad_scale;
      const float mi = c.beta1 * mk[k] + c.one_minus_beta1 * g;
      const float vi = c.beta2 * vk[k] + c.one_minus_beta2 * g * g;
      const float update = (mi * c.inv_bias1) / (sqrtf(vi * c.inv_bias2) + c.eps) + wd * wk[k];
      const float wi = wk[k] - c.lr * update;
      m[i] = mi;
      v[i] = vi;
      w[i] = wi;
      if (copy != nullptr) store_as(copy + i, wi);
    }
  }
}

Coefficients coefficients(const AdamWHyper& h) {
  const double step = static_cast<double>(h.step);
  Coefficients c{};
  c.lr = h.lr;
  c.beta1 = h.beta1;
  c.beta2 = h.beta2;
  c.one_minus_beta1 = 1.0f - h.beta1;
  c.one_minus_beta2 = 1.0f - h.beta2;
  c.eps = h.eps;
  c.grad_scale = h.grad_scale;
  c.inv_bias1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(h.beta1), step)));
  c.inv_bias2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(h.beta2), step)));
  return c;
}

void check_segment(const AdamWSegment& seg, int index) {
  const std::string where = "adamw: segment " + std::to_string(index) + " of " + std::to_string(seg.n) + " elements";
  USTRAIN_ASSERT(seg.n >= 0, where + " has a negative size");
  USTRAIN_ASSERT(seg.n == 0 || (seg.param != nullptr && seg.grad != nullptr && seg.m != nullptr && seg.v != nullptr),
                 where + " has a null parameter, gradient or moment pointer");
}

template <class C>
void update_all(const AdamWSegment* segments, int count, const Coefficients& c, cudaStream_t stream) {
  for (int first = 0; first < count; first += kSegmentsPerLaunch) {
    SegmentTable table{};
    table.count = std::min(kSegmentsPerLaunch, count - first);
    std::int64_t tiles = 0;
    for (int s = 0; s < table.count; ++s) {
      const AdamWSegment& seg = segments[first + s];
      check_segment(seg, first + s);
      table.param[s] = seg.param;
      table.grad[s] = seg.grad;
      table.m[s] = seg.m;
      table.v[s] = seg.v;
      table.compute_copy[s] = seg.compute_copy;
      table.n[s] = seg.n;
      table.weight_decay[s] = seg.weight_decay;
      table.first_tile[s] = tiles;
      tiles += (seg.n + kTile - 1) / kTile;
    }
    table.first_tile[table.count] = tiles;
    if (tiles == 0) continue;
    USTRAIN_ASSERT(tiles <= 0x7fffffff, "adamw: " + std::to_string(tiles) + " tiles exceed one grid");
    adamw_kernel<C><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(table, c);
    USTRAIN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void adamw(const AdamWSegment* segments, int count, const AdamWHyper& h, DType compute_dtype, cudaStream_t stream) {
  USTRAIN_ASSERT(count >= 0 && (count == 0 || segments != nullptr),
                 "adamw: " + std::to_string(count) + " segments without a table");
  USTRAIN_ASSERT(h.step >= 1, "adamw: step is 1-based, got " + std::to_string(h.step));
  const Coefficients c = coefficients(h);
  with_float_type(
      compute_dtype, [&](auto t) { update_all<decltype(t)>(segments, count, c, stream); },
      [&] {
        return std::string("adamw: unsupported compute dtype ") + dtype_name(compute_dtype) + " for " +
               std::to_string(count) + " segments";
      });
}

}  // namespace ustrain::cuda
