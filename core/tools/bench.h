// `ustrain bench`: GEMM throughput at the model's own shapes, then a short training run,
// and the ratio between the two (how much of the GEMM rate the whole step achieves).
#pragma once

#include <cstdint>

#include "core/recipe/recipe.h"

namespace ustrain {

void run_bench(Recipe recipe, std::int64_t steps);

}  // namespace ustrain
