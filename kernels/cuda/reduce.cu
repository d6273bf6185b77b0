// Deterministic sum of squares over many tensors.
//
// A fixed grid of kBlocks blocks walks the tensors with a fixed stride, so which thread adds
// which element, and in what order, never changes. Each launch covers up to
// kTensorsPerLaunch tensors and adds its block sums into the per-block partials (launches
// on one stream run in order); one block then adds the partials in index order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/act_types.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/scratch_sizes.h"

namespace ustrain::cuda {
namespace {

constexpr int kBlocks = kSumOfSquaresBlocks;  // kernels/cuda/scratch_sizes.h
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTensorsPerLaunch = 32;

struct TensorTable {
  const void* data[kTensorsPerLaunch];
  std::int64_t n[kTensorsPerLaunch];
  int count;
};

// Sum over the block in a fixed tree; the result is valid in thread 0.
__device__ double block_sum(double x) {
  __shared__ double warp_sums[kWarps];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  if (lane == 0) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0) {
    x = lane < kWarps ? warp_sums[lane] : 0.0;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  }
  return x;
}

// Grid: exactly kBlocks blocks. partial (kBlocks): overwritten, or added to when `accumulate`.
template <class T>
__global__ void __launch_bounds__(kThreads) partial_sums_kernel(const TensorTable table, double* partial,
                                                                bool accumulate) {
  constexpr std::int64_t kStride = std::int64_t{kBlocks} * kThreads;
  const std::int64_t start = std::int64_t{blockIdx.x} * kThreads + threadIdx.x;
  double acc = 0.0;
  for (int t = 0; t < table.count; ++t) {
    const T* x = static_cast<const T*>(table.data[t]);
    const std::int64_t n = table.n[t];
#pragma unroll 4
    for (std::int64_t i = start; i < n; i += kStride) {
      const double xi = to_float(x[i]);
      acc += xi * xi;
    }
  }
  const double sum = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = accumulate ? partial[blockIdx.x] + sum : sum;
}

// Grid: one block. *result = sum of partial (kBlocks) in a fixed order.
__global__ void __launch_bounds__(kThreads) final_sum_kernel(const double* partial, double* result) {
  double acc = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < kBlocks; i += kThreads) acc += partial[i];
  const double sum = block_sum(acc);
  if (threadIdx.x == 0) *result = sum;
}

template <class T>
void launch_all(double* result, const void* const* tensors, const std::int64_t* sizes, int count, double* partial,
                cudaStream_t stream) {
  for (int first = 0; first < count; first += kTensorsPerLaunch) {
    TensorTable table{};
    table.count = std::min(kTensorsPerLaunch, count - first);
    for (int t = 0; t < table.count; ++t) {
      table.data[t] = tensors[first + t];
      table.n[t] = sizes[first + t];
    }
    partial_sums_kernel<T><<<kBlocks, kThreads, 0, stream>>>(table, partial, first > 0);
    USTRAIN_CUDA_CHECK_LAUNCH();
  }
  final_sum_kernel<<<1, kThreads, 0, stream>>>(partial, result);
  USTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

std::size_t sum_of_squares_workspace_bytes() { return sum_of_squares_scratch_bytes(); }

void sum_of_squares(double* result_device, const void* const* tensors, const std::int64_t* sizes, int count,
                    DType dtype, void* workspace, cudaStream_t stream) {
  const std::string op = std::string("sum_of_squares over ") + std::to_string(count) + " " + dtype_name(dtype) +
                         " tensors";
  USTRAIN_ASSERT(result_device != nullptr && workspace != nullptr, op + ": null result or workspace");
  USTRAIN_ASSERT(count >= 0 && (count == 0 || (tensors != nullptr && sizes != nullptr)), op + ": no tensor table");
  for (int t = 0; t < count; ++t) {
    USTRAIN_ASSERT(sizes[t] >= 0, op + ": tensor " + std::to_string(t) + " has a negative size");
    USTRAIN_ASSERT(sizes[t] == 0 || tensors[t] != nullptr, op + ": tensor " + std::to_string(t) + " is null");
  }
  if (count == 0) {
    USTRAIN_CUDA_CHECK(cudaMemsetAsync(result_device, 0, sizeof(double), stream));  // +0.0 is all zero bits
    return;
  }
  double* partial = static_cast<double*>(workspace);  // (kBlocks)
  with_float_type(
      dtype, [&](auto t) { launch_all<decltype(t)>(result_device, tensors, sizes, count, partial, stream); },
      [&] { return op + ": unsupported dtype"; });
}

}  // namespace ustrain::cuda
