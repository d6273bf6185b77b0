// Measuring a device's curves (calibration.h) through a backend: GEMMs and causal attention
// at a ladder of sizes, a large add for the memory bandwidth and a tiny one for the cost per
// op. `ustrain plan --gpu cpu` measures this machine with it; `ustrain bench --calibration-out`
// measures the recipe's device (a GPU) for `ustrain plan --calibration`.
#pragma once

#include <string>

#include "core/plan/calibration.h"
#include "kernels/backend.h"

namespace ustrain {

// About a second on a CPU: GEMMs (m = 4s, n = k = s) for s = 64 .. 1024 (up to 8192 on a GPU),
// attention over 8 heads of 64 at sequence lengths 64 .. 1024 (4096 on a GPU), both passes.
Calibration measure_calibration(Backend& backend, DType compute, const std::string& source);

// The CPU's curves as `ranks` processes of `threads` threads each find them when they compute at
// the same time (the ranks a node's cores run at once): measured by that many CPU backends at
// once, each point the median over them, so that ranks sharing memory bandwidth and caches (and
// whatever else the machine runs) are measured as a training run meets them.
Calibration measure_shared_cpu_calibration(int ranks, int threads, DType compute, const std::string& source);

}  // namespace ustrain
