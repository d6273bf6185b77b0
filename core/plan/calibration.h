// How fast the device runs the ops of a step, as curves the planner prices recorded ops with:
// GEMMs and attention by an achieved FLOP/s that depends on the call's size, every other op
// by the bytes it moves over an achieved memory bandwidth, plus a fixed cost per op (a kernel
// launch; a dispatch on the CPU).
//
// For `cpu` the curves are measured on this machine (calibration_measure.h); for GPUs they
// default to documented fractions of the published peak (default_gpu_calibration), and
// `ustrain bench --calibration-out FILE` on a real GPU measures them for `--calibration FILE`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/plan/hardware.h"

namespace ustrain {

// Achieved FLOP/s by FLOPs per call, interpolated linearly in log(FLOPs) between points and
// held flat beyond the ends.
struct EfficiencyCurve {
  std::vector<std::pair<double, double>> points;  // (FLOPs per call, achieved FLOP/s), ascending
  double rate(double flops) const;
};

struct Calibration {
  EfficiencyCurve gemm, attention;
  double memory_bytes_per_s = 0;  // achieved by the memory-bound ops
  double op_overhead_s = 0;       // per recorded op
  std::string source;
};

// A GPU's curves as fractions of its peak for `compute`: GEMMs from 10% at 1e8 FLOPs per call
// to 78% at 1e12 and above (cuBLASLt on Hopper reaches ~750 of 989 TFLOP/s on large bf16
// GEMMs), attention from 10% at 1e8 to 55% (FlashAttention-2/cuDNN forward and backward at
// head_dim 64-128), 80% of the HBM bandwidth for memory-bound kernels, 5 us per kernel.
Calibration default_gpu_calibration(const Hardware& hw, DType compute);

// A calibration file (JSON, written by write_calibration); UserError naming the file when it
// cannot be read or is not one.
Calibration read_calibration(const std::string& path);
void write_calibration(const Calibration& c, const std::string& path);

}  // namespace ustrain
