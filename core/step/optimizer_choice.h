// The recipe's optimizer (optim.name, core/distributed/optimizer.h): its memory in the model's
// plan, and the optimizer over that memory once it is bound.
#pragma once

#include <memory>

#include "core/distributed/optimizer.h"
#include "core/model/params.h"
#include "core/recipe/recipe.h"

namespace ustrain {

// Adds the optimizer's own memory (beside the stores' moments) to `plan`: Muon's gathered
// matrices and workspace; nothing for AdamW.
void plan_optimizer(const Recipe& recipe, const ModelParams& params, MemoryPlan& plan);

// `memory` holds what plan_optimizer planned; `tp`: the tensor-parallel group.
std::unique_ptr<Optimizer> make_optimizer(const Recipe& recipe, Backend& backend, const ModelParams& params,
                                          const PlannedMemory& memory, Communicator& tp);

}  // namespace ustrain
