#include "core/step/optimizer_choice.h"

#include "core/distributed/adamw_optimizer.h"
#include "core/distributed/muon_optimizer.h"

namespace ustrain {

void plan_optimizer(const Recipe& recipe, const ModelParams& params, MemoryPlan& plan) {
  if (recipe.optim.name == "muon") plan_muon(params, plan);
}

std::unique_ptr<Optimizer> make_optimizer(const Recipe& recipe, Backend& backend, const ModelParams& params,
                                          const PlannedMemory& memory, Communicator& tp) {
  if (recipe.optim.name == "muon") return std::make_unique<Muon>(recipe.optim, backend, params, memory, &tp);
  USTRAIN_ASSERT(recipe.optim.name == "adamw", "optim.name " + recipe.optim.name + " reached the step");
  return std::make_unique<AdamW>(recipe.optim, backend);
}

}  // namespace ustrain
