// RMSNorm kernels (see rmsnorm.h). Forward and dx: one block per row, two passes over the
// row (a reduction, then the element-wise part), 16-byte packs when the width allows.
// dweight: column sums over fixed row chunks into the workspace, then one ordered sum per
// column, so no float atomics and the same bits on every run.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/scratch_sizes.h"

namespace ustrain::cuda {
namespace {

constexpr int kMaxRowThreads = 256;
constexpr std::int64_t kMaxRowBlocks = std::int64_t{1} << 20;  // rows beyond are strided
constexpr int kColumnThreads = 256;
// dweight row chunks: at most kRmsnormMaxChunks of them, each at least kRmsnormMinChunkRows
// rows long (kernels/cuda/scratch_sizes.h, which sizes the workspace without the device).

// Sum of v over the block, returned to every thread. blockDim.x is a multiple of 32 (at most
// 1024); `scratch` holds 32 values. Every thread of the block must call it.
__device__ double block_sum(double v, double* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0.0;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __syncthreads();  // scratch may be written again by the next call
  return v;
}

// out (N, D), rstd (N), x (N, D), weight (D); N elements per pack, D % N == 0.
template <class T, int N>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* x, const T* weight, std::int64_t rows,
                                       std::int64_t dim, float eps) {
  __shared__ double scratch[32];
  const std::int64_t packs = dim / N;
  const auto* w = reinterpret_cast<const Pack<T, N>*>(weight);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const auto* xr = reinterpret_cast<const Pack<T, N>*>(x + row * dim);
    auto* outr = reinterpret_cast<Pack<T, N>*>(out + row * dim);
    double squares = 0.0;
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> v = xr[p];
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const double f = to_float(v.v[k]);
        squares += f * f;
      }
    }
    squares = block_sum(squares, scratch);
    const float rs = static_cast<float>(1.0 / sqrt(squares / static_cast<double>(dim) + eps));
    if (threadIdx.x == 0) rstd[row] = rs;
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> v = xr[p];
      const Pack<T, N> wv = w[p];
      Pack<T, N> o;
#pragma unroll
      for (int k = 0; k < N; ++k) o.v[k] = from_float<T>(to_float(v.v[k]) * rs * to_float(wv.v[k]));
      outr[p] = o;
    }
  }
}

// partial (chunks, D): partial[k][c] = sum over the rows of chunk k of dout * x * rstd.
// Grid (ceil(D / blockDim), chunks); one thread per column, coalesced across the warp.
template <class T>
__global__ void rmsnorm_dweight_partial_kernel(double* partial, const T* dout, const T* x, const float* rstd,
                                               std::int64_t rows, std::int64_t dim, std::int64_t chunk_rows) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * chunk_rows;
  const std::int64_t end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
  double acc = 0.0;
  for (std::int64_t n = begin; n < end; ++n) {
    const float product = to_float(dout[n * dim + c]) * to_float(x[n * dim + c]) * rstd[n];
    acc += static_cast<double>(product);
  }
  partial[static_cast<std::int64_t>(blockIdx.y) * dim + c] = acc;
}

// dweight (D) += sum over chunks of partial (chunks, D), chunks in order.
__global__ void rmsnorm_dweight_finish_kernel(float* dweight, const double* partial, std::int64_t chunks,
                                              std::int64_t dim) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  double total = 0.0;
  for (std::int64_t k = 0; k < chunks; ++k) total += partial[k * dim + c];
  dweight[c] += static_cast<float>(total);
}

// dx (N, D) = rstd * (w * dout - x * rstd^2 * mean(dout * w * x)). dx may alias dout or x:
// the block reads its whole row before the reduction's barrier, and each thread reads a
// pack before writing it.
template <class T, int N>
__global__ void rmsnorm_dx_kernel(T* dx, const T* dout, const T* x, const T* weight, const float* rstd,
                                  std::int64_t rows, std::int64_t dim) {
  __shared__ double scratch[32];
  const std::int64_t packs = dim / N;
  const auto* w = reinterpret_cast<const Pack<T, N>*>(weight);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const auto* gr = reinterpret_cast<const Pack<T, N>*>(dout + row * dim);
    const auto* xr = reinterpret_cast<const Pack<T, N>*>(x + row * dim);
    auto* dxr = reinterpret_cast<Pack<T, N>*>(dx + row * dim);
    double dot = 0.0;
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> g = gr[p];
      const Pack<T, N> xv = xr[p];
      const Pack<T, N> wv = w[p];
#pragma unroll
      for (int k = 0; k < N; ++k)
        dot += static_cast<double>(to_float(g.v[k]) * to_float(wv.v[k])) * to_float(xv.v[k]);
    }
    dot = block_sum(dot, scratch);
    const float rs = rstd[row];
    const float coef = static_cast<float>(dot / static_cast<double>(dim)) * rs * rs;
    for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> g = gr[p];
      const Pack<T, N> xv = xr[p];
      const Pack<T, N> wv = w[p];
      Pack<T, N> d;
#pragma unroll
      for (int k = 0; k < N; ++k)
        d.v[k] = from_float<T>(rs * (to_float(wv.v[k]) * to_float(g.v[k]) - to_float(xv.v[k]) * coef));
      dxr[p] = d;
    }
  }
}

std::string shape_of(std::int64_t rows, std::int64_t dim) {
  return "(" + std::to_string(rows) + ", " + std::to_string(dim) + ")";
}

// Threads for a row of `packs` packs: a multiple of 32, at most kMaxRowThreads.
int row_threads(std::int64_t packs) {
  return static_cast<int>(std::clamp<std::int64_t>((packs + 31) / 32 * 32, 32, kMaxRowThreads));
}

unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>(std::min(rows, kMaxRowBlocks)); }

std::int64_t chunk_rows_for(std::int64_t rows) { return rmsnorm_chunk_rows(rows); }

std::int64_t chunks_for(std::int64_t rows) { return rmsnorm_chunks(rows); }

}  // namespace

void rmsnorm_forward(void* out, float* rstd, const void* x, const void* weight, std::int64_t rows,
                     std::int64_t dim, float eps, DType act, cudaStream_t stream) {
  USTRAIN_ASSERT(is_float_type(act) && rows >= 0 && dim > 0,
                 std::string("rmsnorm_forward: unsupported dtype ") + dtype_name(act) + " or shape " +
                     shape_of(rows, dim));
  if (rows == 0) return;
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kPack = 16 / sizeof(T);
    const bool packed = dim % kPack == 0 && aligned16(out) && aligned16(x) && aligned16(weight);
    const int threads = row_threads(packed ? dim / kPack : dim);
    auto* o = static_cast<T*>(out);
    const auto* xp = static_cast<const T*>(x);
    const auto* w = static_cast<const T*>(weight);
    if (packed)
      rmsnorm_forward_kernel<T, kPack><<<row_blocks(rows), threads, 0, stream>>>(o, rstd, xp, w, rows, dim, eps);
    else
      rmsnorm_forward_kernel<T, 1><<<row_blocks(rows), threads, 0, stream>>>(o, rstd, xp, w, rows, dim, eps);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

std::size_t rmsnorm_backward_workspace_bytes(std::int64_t rows, std::int64_t dim) {
  return rmsnorm_backward_scratch_bytes(rows, dim);
}

void rmsnorm_backward(void* dx, float* dweight, const void* dout, const void* x, const void* weight,
                      const float* rstd, std::int64_t rows, std::int64_t dim, DType act, void* workspace,
                      cudaStream_t stream) {
  USTRAIN_ASSERT(is_float_type(act) && rows >= 0 && dim > 0,
                 std::string("rmsnorm_backward: unsupported dtype ") + dtype_name(act) + " or shape " +
                     shape_of(rows, dim));
  if (rows == 0) return;
  USTRAIN_ASSERT(workspace != nullptr && reinterpret_cast<std::uintptr_t>(workspace) % alignof(double) == 0,
                 "rmsnorm_backward: needs an 8-byte aligned workspace of " +
                     std::to_string(rmsnorm_backward_workspace_bytes(rows, dim)) + " bytes for " +
                     shape_of(rows, dim));
  with_float_type(act, [&](auto tag) {
    using T = decltype(tag);
    const auto* g = static_cast<const T*>(dout);
    const auto* xp = static_cast<const T*>(x);
    const auto* w = static_cast<const T*>(weight);
    auto* partial = static_cast<double*>(workspace);  // (chunks, D)

    // dweight first: it reads dout and x, which dx may overwrite.
    const std::int64_t chunks = chunks_for(rows);
    const auto column_blocks = static_cast<unsigned>((dim + kColumnThreads - 1) / kColumnThreads);
    const dim3 partial_grid(column_blocks, static_cast<unsigned>(chunks));
    rmsnorm_dweight_partial_kernel<T><<<partial_grid, kColumnThreads, 0, stream>>>(partial, g, xp, rstd, rows, dim,
                                                                                    chunk_rows_for(rows));
    USTRAIN_CUDA_CHECK_LAUNCH();
    rmsnorm_dweight_finish_kernel<<<column_blocks, kColumnThreads, 0, stream>>>(dweight, partial, chunks, dim);
    USTRAIN_CUDA_CHECK_LAUNCH();

    constexpr int kPack = 16 / sizeof(T);
    const bool packed = dim % kPack == 0 && aligned16(dx) && aligned16(dout) && aligned16(x) && aligned16(weight);
    const int threads = row_threads(packed ? dim / kPack : dim);
    auto* d = static_cast<T*>(dx);
    if (packed)
      rmsnorm_dx_kernel<T, kPack><<<row_blocks(rows), threads, 0, stream>>>(d, g, xp, w, rstd, rows, dim);
    else
      rmsnorm_dx_kernel<T, 1><<<row_blocks(rows), threads, 0, stream>>>(d, g, xp, w, rstd, rows, dim);
    USTRAIN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ustrain::cuda
