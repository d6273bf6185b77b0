// The denominator of MFU: the device's peak dense FLOP/s for the run's precision.
//
// GPUs have a published peak (H100/H200 SXM: 989 TFLOP/s bf16). A CPU has no trustworthy
// published number (clocks, SIMD width and VM limits vary), so on CPU we measure the
// machine's single-precision GEMM rate and report MFU against that. The rate is measured once
// per machine and thread count and kept (core/monitor/kept_peak.h): runs and resumes on one
// machine then divide by the same peak, and their MFU compares.
#pragma once

#include <string>

#include "kernels/backend.h"

namespace ustrain {

struct PeakFlops {
  double flops_per_second = 0;
  std::string source;  // how it was obtained (and on a CPU, when), printed next to MFU
};

// Where a CPU's measured peak is kept, and whether to measure it again.
struct PeakCache {
  std::string path;        // empty: measure every time, keep nothing
  bool remeasure = false;  // measure, and replace what is kept
};

// `compute`: the dtype the model's GEMMs run in (a GPU's peak depends on it). On a CPU, the
// rate kept in `cache` for this CPU model and thread count, else (or with `remeasure`) the
// rate measured now, which is then kept; a file that cannot be written is said in `source`,
// and the measured rate is used all the same.
PeakFlops device_peak_flops(Backend& backend, DType compute = DType::f32, const PeakCache& cache = {});

// GEMM FLOP/s of out (m, n) = x (m, k) @ w (n, k)^T through the backend, operands in
// `dtype` (random values: some GPUs run faster on zeros), best of `repeats`.
double measure_gemm_flops(Backend& backend, std::int64_t m, std::int64_t n, std::int64_t k, int repeats,
                          DType dtype = DType::f32);

}  // namespace ustrain
