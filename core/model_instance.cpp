#include "core/model_instance.h"

namespace ustrain {

std::unique_ptr<Backend> make_recipe_backend(const Recipe& recipe) {
  return make_backend(recipe.device.type == "cuda" ? Device::cuda : Device::cpu,
                      static_cast<int>(recipe.device.threads));
}

ModelInstance::ModelInstance(const Recipe& recipe, std::int64_t max_batch, std::int64_t max_seq, Recompute policy,
                             ParamSharding sharding)
    : backend(make_recipe_backend(recipe)), model(recipe.model, max_batch, max_seq, policy) {
  model.plan(plan, sharding);
  memory = std::make_unique<PlannedMemory>(plan, *backend);
  model.bind(*memory, *backend);
}

}  // namespace ustrain
