#include "core/plan/rank_memory.h"

#include <algorithm>

#include "core/checkpoint/writer.h"
#include "core/plan/step_scratch.h"
#include "core/trace/trace_memory.h"
#include "core/step/fp8_layers.h"
#include "core/step/model_instance.h"
#include "core/step/optimizer_choice.h"
#include "core/step/training_step.h"

namespace ustrain {

RankMemory plan_rank_memory(const Recipe& recipe, int pp_rank) {
  return plan_rank_memory(recipe, pp_rank, plan_pipeline(recipe, pp_rank));
}

RankMemory plan_rank_memory(const Recipe& recipe, int pp_rank, PipelinePlan pipeline) {
  const std::size_t scratch = deviceless_op_scratch(recipe, pp_rank);
  return plan_rank_memory(recipe, pp_rank, std::move(pipeline), scratch);
}

RankMemory plan_rank_memory(const Recipe& recipe, int pp_rank, PipelinePlan pipeline, std::size_t op_scratch) {
  RankMemory m{geometry_of(recipe, 0, pp_rank), std::move(pipeline), MemoryPlan{}};
  LlamaModel stage(recipe.model, m.geometry, recipe.train.micro_batch, parse_recompute(recipe.train.recompute),
                   compute_dtype(recipe));
  plan_model(stage, m.plan, sharding_of(recipe, 0, 0), m.pipeline.slots);
  plan_optimizer(recipe, stage.params(), m.plan);
  plan_library_workspace(recipe.device.type == "cuda" ? Device::cuda : Device::cpu, m.plan);
  plan_op_scratch(std::max(op_scratch, fp8_op_scratch_bytes(recipe, stage, recipe.train.micro_batch)),
                  m.plan);
  plan_checkpoint_snapshot(stage.params(), m.plan);
  plan_fp8(recipe, stage, recipe.train.micro_batch, m.plan);
  plan_trace(recipe, m.plan);
  return m;
}

}  // namespace ustrain
