#include "core/train/optimizer_choice.h"

#include "core/distributed/adamw_optimizer.h"

namespace ustrain {

void plan_optimizer(const Recipe& recipe, const ModelParams& params, MemoryPlan& plan) {
  (void)recipe, (void)params, (void)plan;  // AdamW's moments are the stores'
}

std::unique_ptr<Optimizer> make_optimizer(const Recipe& recipe, Backend& backend, const ModelParams& params,
                                          const PlannedMemory& memory) {
  (void)params, (void)memory;
  return std::make_unique<AdamW>(recipe.optim, backend);
}

}  // namespace ustrain
