// The memory plan one pipeline rank of a recipe's layout holds, as `ustrain train` plans it
// before allocating (tensor- and data-parallel rank 0 of the pipeline rank, whose share is the
// largest): what `--dry-run` prints per pipeline rank and what `ustrain plan` takes the maximum
// of, from one function so that the two cannot disagree.
#pragma once

#include "core/distributed/pipeline_plan.h"
#include "core/memory/memory_plan.h"
#include "core/recipe/geometry.h"
#include "core/recipe/recipe.h"

namespace ustrain {

struct RankMemory {
  ModelGeometry geometry;
  PipelinePlan pipeline;
  MemoryPlan plan;  // arenas, plus the checkpoint snapshot and trace buffers as host buffers
};

// The resolved `recipe`'s plan for pipeline rank `pp_rank` (`ustrain train` saves at least its
// last step, so the checkpoint snapshot is always planned).
RankMemory plan_rank_memory(const Recipe& recipe, int pp_rank);
// The same with the rank's pipeline plan already made (pipeline_plan_of).
RankMemory plan_rank_memory(const Recipe& recipe, int pp_rank, PipelinePlan pipeline);
// The same with the rank's op scratch already known (deviceless_op_scratch): a planner that
// recorded the step for its timing takes the scratch from that recording.
RankMemory plan_rank_memory(const Recipe& recipe, int pp_rank, PipelinePlan pipeline, std::size_t op_scratch);

}  // namespace ustrain
