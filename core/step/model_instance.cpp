#include "core/step/model_instance.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/checkpoint/writer.h"
#include "core/run/cpu_threads.h"
#include "core/distributed/parallelize.h"
#include "core/trace/trace_memory.h"
#include "core/step/fp8_layers.h"
#include "core/step/optimizer_choice.h"
#include "kernels/fp8_backend.h"

namespace ustrain {

fp8::Config fp8_config_of(const Recipe& recipe) {
  const TrainSection& t = recipe.train;
  return {fp8::recipe_named(t.fp8_recipe), t.fp8_grad_format == "e4m3" ? fp8::Format::e4m3 : fp8::Format::e5m2,
          static_cast<int>(t.fp8_amax_history), static_cast<int>(t.fp8_margin)};
}

DType compute_dtype(const Recipe& recipe) {
  const std::string& p = recipe.train.precision;
  if (p == "bf16" || p == "fp8") return DType::bf16;  // fp8: bf16 outside the FP8 GEMMs
  if (p == "fp16") return DType::f16;
  USTRAIN_ASSERT(p == "fp32", "train.precision " + p + " reached the model; the recipe check refuses it");
  return DType::f32;
}

std::unique_ptr<Backend> make_recipe_backend(const Recipe& recipe, int device_index) {
  if (recipe.device.type == "cpu") {
    const ThreadCheck threads = check_threads(recipe.device.threads, usable_cores());
    if (!threads.error.empty()) throw UserError(threads.error);
    if (!threads.warning.empty()) spdlog::warn("{}", threads.warning);
  }
  if (recipe.train.precision == "fp8")
    return make_fp8_backend(recipe.device.type == "cuda" ? Device::cuda : Device::cpu,
                            static_cast<int>(recipe.device.threads), device_index, fp8_config_of(recipe));
  return make_backend(recipe.device.type == "cuda" ? Device::cuda : Device::cpu,
                      static_cast<int>(recipe.device.threads), device_index);
}

void plan_model(LlamaModel& model, MemoryPlan& plan, const ParamShardings& sharding, const SlotPlan& slots) {
  parallelize(model.params().registry(), model.geometry());
  model.plan(plan, sharding, slots);
}

namespace {

std::size_t available_to(const ModelPlacement& placement, const Backend& backend) {
  return placement.memory.available > 0 ? placement.memory.available : backend.available_memory_bytes();
}

// The recipe's model, once the least its training state takes fits the memory: an absurd
// model is refused before its layers are made.
const ModelSection& fitting_model(const Recipe& recipe, const ModelPlacement& placement, const Backend& backend) {
  USTRAIN_ASSERT(recipe.model.vocab_size > 0, "model.vocab_size is unset: the recipe was not resolved");
  check_state_fits(recipe, available_to(placement, backend), placement.memory.sharers, backend.memory_name());
  return recipe.model;
}

}  // namespace

ModelInstance::ModelInstance(const Recipe& recipe, const ModelGeometry& geometry, std::int64_t max_batch,
                             Recompute policy, ModelPlacement placement, std::unique_ptr<Backend> be)
    : backend(be ? std::move(be) : make_recipe_backend(recipe)),
      model(fitting_model(recipe, placement, *backend), geometry, max_batch, policy, compute_dtype(recipe),
            placement.parallel) {
  plan_model(model, plan, placement.sharding, placement.slots);
  plan_optimizer(recipe, model.params(), plan);
  plan_library_workspace(backend->device(), plan);
  plan_op_scratch(std::max(placement.op_scratch_bytes, fp8_op_scratch_bytes(recipe, model, max_batch)), plan);
  if (placement.saves_checkpoints) plan_checkpoint_snapshot(model.params(), plan);
  plan_fp8(recipe, model, max_batch, plan);
  plan_trace(recipe, plan);
  // On a GPU the host buffers are not the checked memory's: the run checks them against the
  // host (RunSetup, before the checkpoint writer allocates its snapshot).
  check_plan_fits(plan, available_to(placement, *backend), placement.memory.sharers, backend->memory_name(),
                  memory_check_of(recipe), 0, backend->device() == Device::cpu);
  memory = std::make_unique<PlannedMemory>(plan, *backend);
  model.bind(*memory, *backend);
  add_fp8_layers(model.params(), *backend);
}

}  // namespace ustrain
