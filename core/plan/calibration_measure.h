// Measuring a device's curves (calibration.h) through a backend: GEMMs and causal attention
// at a ladder of sizes, a large add for the memory bandwidth and a tiny one for the cost per
// op. `ustrain plan --gpu cpu` measures this machine with it; `ustrain bench --calibration-out`
// measures the recipe's device (a GPU) for `ustrain plan --calibration`.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/recipe/recipe.h"

#include "core/plan/calibration.h"
#include "kernels/backend.h"

namespace ustrain {

// The shapes a model's step computes with, at tp = 1: its linear layers (out, in features) and
// its attention heads' width.
struct ModelShapes {
  std::int64_t head_dim = 64;
  std::vector<std::pair<std::int64_t, std::int64_t>> linears;
};
ModelShapes model_shapes(const ModelSection& model);

// A few seconds on a CPU: the model's linear layers, each's three GEMMs, at 64 .. 4096 tokens
// (512 .. 32768 on a GPU); attention over 8 heads of the model's head_dim at sequence lengths
// 64 .. 1024 (4096 on a GPU), both passes; a residual add, an RMSNorm and a SwiGLU for the
// memory-bound ops.
Calibration measure_calibration(Backend& backend, DType compute, const std::string& source, const ModelShapes& model);

// The CPU's curves as `ranks` processes of `threads` threads each find them when they compute at
// the same time (the ranks a node's cores run at once): measured by that many CPU backends at
// once, each point the median over them, so that ranks sharing memory bandwidth and caches (and
// whatever else the machine runs) are measured as a training run meets them.
Calibration measure_shared_cpu_calibration(int ranks, int threads, DType compute, const std::string& source,
                                           const ModelShapes& model);

}  // namespace ustrain
