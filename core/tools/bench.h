// `ustrain bench`: GEMM throughput at the model's own shapes, then a short training run,
// and the ratio between the two (how much of the GEMM rate the whole step achieves).
#pragma once

#include <cstdint>
#include <string>

#include "core/recipe/recipe.h"

namespace ustrain {

// `calibration_out`: also measure the device's GEMM, attention and bandwidth curves and write
// them there for `ustrain plan --calibration` (core/plan/calibration.h); "" does not.
void run_bench(Recipe recipe, std::int64_t steps, const std::string& calibration_out = "");

}  // namespace ustrain
