// A model ready to run: its backend, memory plan and planned memory, bound together.
// Training, evaluation and sampling all start from one of these.
#pragma once

#include <cstdint>
#include <memory>

#include "core/memory_plan.h"
#include "core/model/llama.h"
#include "core/recipe.h"

namespace ustrain {

// The dtype the model computes in for train.precision: f32, bf16 or f16.
DType compute_dtype(const Recipe& recipe);

// The backend the recipe's [device] section asks for.
std::unique_ptr<Backend> make_recipe_backend(const Recipe& recipe);

struct ModelInstance {
  // Plans for micro-batches of at most (max_batch, max_seq) tokens, with the training state
  // split as `sharding` says, and allocates the plan.
  ModelInstance(const Recipe& recipe, std::int64_t max_batch, std::int64_t max_seq, Recompute policy,
                ParamSharding sharding = {});

  std::unique_ptr<Backend> backend;
  LlamaModel model;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;
};

}  // namespace ustrain
