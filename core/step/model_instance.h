// A model ready to run: its backend, memory plan and planned memory, bound together.
// Training, evaluation and sampling all start from one of these.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/step/memory_fit.h"
#include "core/memory/memory_plan.h"
#include "core/model/llama.h"
#include "core/recipe/recipe.h"
#include "kernels/fp8/fp8_scaling.h"

namespace ustrain {

// The dtype the model computes in for train.precision: f32, bf16 (bf16 and fp8) or f16.
DType compute_dtype(const Recipe& recipe);

// train.precision = "fp8"'s scaling keys (train.fp8_*).
fp8::Config fp8_config_of(const Recipe& recipe);

// The backend the recipe's [device] section asks for (with FP8 linear layers for train.precision
// = "fp8"); on CUDA, GPU `device_index`.
std::unique_ptr<Backend> make_recipe_backend(const Recipe& recipe, int device_index = 0);

// How one rank holds the part of the model its geometry names: its layers' tensor-, context-
// and expert-parallel groups (one rank's by default), its share of the training state under
// ZeRO per sync group (sharding), and the micro-batches its pipeline schedule keeps in flight
// (slots).
struct ModelPlacement {
  std::optional<LayerParallel> parallel{};  // its groups not owned; they must outlive the instance
  ParamShardings sharding{};
  SlotPlan slots{};
  MemoryShare memory{};  // the memory the model must fit in (core/step/memory_fit.h)
  // The run saves checkpoints: the plan holds the writer's host snapshot (core/checkpoint/writer.h).
  bool saves_checkpoints = false;
  // Bytes of op scratch the plan holds (core/plan/step_scratch.h); 0 for none.
  std::size_t op_scratch_bytes = 0;
};

struct ModelInstance {
  // This rank's part of the recipe's model (`geometry`: ModelGeometry::of(recipe.model, {},
  // seq_len) for the whole model), planned for micro-batches of at most `max_batch` sequences
  // of the geometry's length; places the parameters (core/distributed/parallelize.h) and
  // allocates the plan on `backend` (the recipe's, when null). UserError, before anything is
  // allocated, when the model does not fit the memory.
  ModelInstance(const Recipe& recipe, const ModelGeometry& geometry, std::int64_t max_batch, Recompute policy,
                ModelPlacement placement = {}, std::unique_ptr<Backend> backend = nullptr);

  std::unique_ptr<Backend> backend;
  LlamaModel model;
  MemoryPlan plan;
  std::unique_ptr<PlannedMemory> memory;
};

// A model planned and placed, not allocated: what `--dry-run` and the memory plan describe.
void plan_model(LlamaModel& model, MemoryPlan& plan, const ParamShardings& sharding, const SlotPlan& slots = {});

}  // namespace ustrain
