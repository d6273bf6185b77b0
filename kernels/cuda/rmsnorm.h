// RMSNorm over the last dimension on CUDA, the same formulas as kernels/cpu/cpu_rmsnorm.cpp:
//   rstd = 1 / sqrt(mean(x^2) + eps)   (sum of squares in double, as the CPU does)
//   out  = x * rstd * weight
//   dx   = rstd * (weight * dout - x * rstd^2 * mean(dout * weight * x))
//   dweight += sum over rows of dout * x * rstd
// x, out, dout, dx and weight are in the activation dtype `act` (f32, bf16 or f16); rstd and
// dweight are fp32. Asynchronous on `stream`.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// out (N, D) = x (N, D) * rstd (N) * weight (D); rstd is written for the backward.
// out may alias x.
void rmsnorm_forward(void* out, float* rstd, const void* x, const void* weight, std::int64_t rows,
                     std::int64_t dim, float eps, DType act, cudaStream_t stream);

// Scratch for rmsnorm_backward's deterministic dweight reduction: partial column sums of
// row chunks, in double. 0 when rows or dim is 0.
std::size_t rmsnorm_backward_workspace_bytes(std::int64_t rows, std::int64_t dim);

// dx (N, D) overwritten; dweight (D) ACCUMULATED (+=). dx may alias dout or x. The dweight
// sum over rows goes through `workspace` (rmsnorm_backward_workspace_bytes(rows, dim) bytes)
// in a fixed order, so it is bitwise the same on every run.
void rmsnorm_backward(void* dx, float* dweight, const void* dout, const void* x, const void* weight,
                      const float* rstd, std::int64_t rows, std::int64_t dim, DType act, void* workspace,
                      cudaStream_t stream);

}  // namespace ustrain::cuda
