// Deterministic reductions on the GPU: the same inputs give the same bits on every run,
// whatever the scheduling (fixed grid, fixed assignment of elements, fixed-order sums).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// Scratch bytes that sum_of_squares needs; the same for every input.
std::size_t sum_of_squares_workspace_bytes();

// *result_device (one double in device memory) = sum over the `count` tensors of x^2,
// accumulated in double. `tensors` and `sizes` are HOST arrays (device pointers and
// element counts); every tensor holds `dtype` (f32, bf16 or f16). The caller copies the
// result back. Inf or NaN anywhere shows in the sum.
void sum_of_squares(double* result_device, const void* const* tensors, const std::int64_t* sizes, int count,
                    DType dtype, void* workspace, cudaStream_t stream);

}  // namespace ustrain::cuda
