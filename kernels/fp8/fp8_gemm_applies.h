// Which linear-op calls the FP8 backends (CPU and CUDA) compute in FP8; every other call runs
// the backend's 16-bit GEMM.
#pragma once

#include "kernels/tensor.h"

namespace ustrain::fp8 {

// Whether a GEMM of bf16 operands a and b into `result` takes FP8: a layer with scaling state
// (the caller's lookup), `result` in `result_type` (bf16, or fp32 for a weight gradient), the
// layer's `matrix` (its weight or weight gradient) 2-D, and neither operand empty.
inline bool fp8_gemm_applies(bool has_state, const Tensor& result, DType result_type, const Tensor& a,
                             const Tensor& b, const Tensor& matrix) {
  return has_state && a.dtype == DType::bf16 && b.dtype == DType::bf16 && result.dtype == result_type &&
         matrix.shape.rank() == 2 && a.numel() != 0 && b.numel() != 0;
}

}  // namespace ustrain::fp8
