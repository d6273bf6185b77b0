#include "core/model_instance.h"

#include "core/distributed/parallelize.h"

namespace ustrain {

DType compute_dtype(const Recipe& recipe) {
  const std::string& p = recipe.train.precision;
  if (p == "bf16") return DType::bf16;
  if (p == "fp16") return DType::f16;
  USTRAIN_ASSERT(p == "fp32", "train.precision " + p + " reached the model; the recipe check refuses it");
  return DType::f32;
}

std::unique_ptr<Backend> make_recipe_backend(const Recipe& recipe, int device_index) {
  return make_backend(recipe.device.type == "cuda" ? Device::cuda : Device::cpu,
                      static_cast<int>(recipe.device.threads), device_index);
}

void plan_model(LlamaModel& model, MemoryPlan& plan, ParamSharding sharding, const SlotPlan& slots) {
  parallelize(model.params(), model.geometry());
  model.plan(plan, sharding, slots);
}

ModelInstance::ModelInstance(const Recipe& recipe, std::int64_t max_batch, std::int64_t max_seq, Recompute policy,
                             ModelPlacement placement, std::unique_ptr<Backend> be)
    : backend(be ? std::move(be) : make_recipe_backend(recipe)),
      model(recipe.model, max_batch, max_seq, policy, compute_dtype(recipe), placement.geometry, placement.tp) {
  plan_model(model, plan, placement.sharding, placement.slots);
  memory = std::make_unique<PlannedMemory>(plan, *backend);
  model.bind(*memory, *backend);
}

}  // namespace ustrain
