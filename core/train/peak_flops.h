// The denominator of MFU: the device's peak dense FLOP/s for the run's precision.
//
// GPUs have a published peak (H100/H200 SXM: 989 TFLOP/s bf16). A CPU has no trustworthy
// published number (clocks, SIMD width and VM limits vary), so on CPU we measure the
// machine's single-precision GEMM rate once at start and report MFU against that.
#pragma once

#include <string>

#include "kernels/backend.h"

namespace ustrain {

struct PeakFlops {
  double flops_per_second = 0;
  std::string source;  // how it was obtained, printed next to MFU
};

// `compute`: the dtype the model's GEMMs run in (a GPU's peak depends on it).
PeakFlops device_peak_flops(Backend& backend, DType compute = DType::f32);

// GEMM FLOP/s of out (m, n) = x (m, k) @ w (n, k)^T through the backend, operands in
// `dtype` (random values: some GPUs run faster on zeros), best of `repeats`.
double measure_gemm_flops(Backend& backend, std::int64_t m, std::int64_t n, std::int64_t k, int repeats,
                          DType dtype = DType::f32);

}  // namespace ustrain
