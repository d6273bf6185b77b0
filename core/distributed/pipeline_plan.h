// What a rank's pipeline needs to know before its model is planned: the programs of the
// recipe's schedule for a training step and for a validation pass (parallel/
// pipeline_schedule.h), and how many activation slots and receive buffers each of its chunks
// needs (the simulator's peaks over both programs, parallel/pipeline_simulation.h).
#pragma once

#include "core/model/llama.h"
#include "core/recipe/recipe.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_simulation.h"

namespace ustrain {

struct PipelinePlan {
  PipelineProgram train;                 // train.grad_accum_steps() micro-batches
  PipelineProgram eval;                  // train.eval_batches of them, forward only
  PipelineSimulation train_simulation;   // with equal costs: bubble and peaks
  SlotPlan slots;                        // this rank's
};

// The recipe check has refused what the schedule cannot run (schedule_refusal).
PipelinePlan plan_pipeline(const Recipe& recipe, int pp_rank);

// The same in two parts, so that every rank's plan comes from one replay of each program:
// the programs and their simulations with equal costs, then one rank's plan from them.
struct PipelinePrograms {
  PipelineProgram train, eval;
  PipelineSimulation train_simulation, eval_simulation;
};
PipelinePrograms plan_pipeline_programs(const Recipe& recipe);
PipelinePlan pipeline_plan_of(const Recipe& recipe, const PipelinePrograms& programs, int pp_rank);

// The recipe's pipeline shape for `micro_batches` micro-batches.
PipelineShape pipeline_shape(const Recipe& recipe, int micro_batches);

}  // namespace ustrain
