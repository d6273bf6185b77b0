#include "core/model_instance.h"

#include <spdlog/spdlog.h>

#include "core/cpu_threads.h"
#include "core/distributed/parallelize.h"
#include "core/host_memory.h"
#include "parallel/launch.h"

namespace ustrain {

DType compute_dtype(const Recipe& recipe) {
  const std::string& p = recipe.train.precision;
  if (p == "bf16") return DType::bf16;
  if (p == "fp16") return DType::f16;
  USTRAIN_ASSERT(p == "fp32", "train.precision " + p + " reached the model; the recipe check refuses it");
  return DType::f32;
}

namespace {

// The processes of this job on this node, which share its memory; 1 when the launcher's
// variables cannot be read (the trainer has already reported that).
int processes_on_node() {
  try {
    return discover_process().local_world_size;
  } catch (const UserError&) {
    return 1;
  }
}

}  // namespace

std::unique_ptr<Backend> make_recipe_backend(const Recipe& recipe, int device_index) {
  if (recipe.device.type == "cpu") {
    const ThreadCheck threads = check_threads(recipe.device.threads, usable_cores());
    if (!threads.error.empty()) throw UserError(threads.error);
    if (!threads.warning.empty()) spdlog::warn("{}", threads.warning);
  }
  return make_backend(recipe.device.type == "cuda" ? Device::cuda : Device::cpu,
                      static_cast<int>(recipe.device.threads), device_index);
}

void plan_model(LlamaModel& model, MemoryPlan& plan, ParamSharding sharding) {
  parallelize(model.params(), model.geometry());
  model.plan(plan, sharding);
}

ModelInstance::ModelInstance(const Recipe& recipe, std::int64_t max_batch, std::int64_t max_seq, Recompute policy,
                             ModelPlacement placement, std::unique_ptr<Backend> be)
    : backend(be ? std::move(be) : make_recipe_backend(recipe)),
      model(recipe.model, max_batch, max_seq, policy, compute_dtype(recipe), placement.geometry, placement.tp) {
  plan_model(model, plan, placement.sharding);
  if (backend->device() == Device::cpu) check_host_memory(plan.total_bytes(), processes_on_node());
  memory = std::make_unique<PlannedMemory>(plan, *backend);
  model.bind(*memory, *backend);
}

}  // namespace ustrain
