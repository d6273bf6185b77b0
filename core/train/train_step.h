// One optimizer step on this rank, and the validation pass: the model as this rank trains it
// (Run), and what a step does with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/distributed/pipeline_executor.h"
#include "core/distributed/pipeline_plan.h"
#include "core/distributed/process_layout.h"
#include "core/distributed/zero_engine.h"
#include "core/memory/memory_fit.h"
#include "core/recipe/recipe.h"
#include "core/train/loss_scaler.h"
#include "core/train/lr_schedule.h"
#include "core/train/model_instance.h"
#include "core/train/nonfinite_steps.h"
#include "core/train/phase_timer.h"
#include "core/train/training_data.h"
#include "parallel/trace.h"

namespace ustrain {

// The model's sizes on tensor-parallel rank `tp_rank` and pipeline rank `pp_rank` of the
// recipe's layout.
ModelGeometry geometry_of(const Recipe& r, int tp_rank, int pp_rank);

// How gradient-group rank `rank` of the recipe's layout holds the training state (ZeRO
// shards over the ranks whose gradients add up: dp, times cp once it exists).
ParamSharding sharding_of(const Recipe& r, int rank);

// Everything one process needs to train: the recipe, this rank's geometry, tensor-parallel
// layer kinds and pipeline programs, a model instance for its micro-batches holding this
// rank's part of the state, the data-parallel engine that keeps the ranks' parts consistent,
// and the executors that run the programs.
struct Run {
  const Recipe& recipe;
  ProcessGroups& groups;
  ModelGeometry geometry;
  TensorParallel tp;
  PipelinePlan pipeline;
  ModelInstance instance;
  LlamaModel& model;
  Backend& backend;
  ZeroEngine engine;
  LossScaler scaler;
  PipelineExecutor train_executor, eval_executor;
  NonfiniteSteps bad_steps;
  Run(const Recipe& r, ProcessLayout& layout, std::unique_ptr<Backend> be, std::size_t bucket_bytes,
      MemoryShare memory);
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  // Communicators whose traffic the metrics report.
  Communicator& gradient_comm() { return groups.gradients().for_tensors(backend.device()); }
  Communicator& tp_comm() { return groups.tp().for_tensors(backend.device()); }
  Communicator& pp_comm() { return groups.pp().for_tensors(backend.device()); }
};

struct StepResult {
  double loss, grad_norm, lr;
  bool applied = true;     // false: skipped (fp16 gradients overflowed, or a bad step)
  bool nonfinite = false;  // a bad step: the loss or gradient norm is not finite (core/train/nonfinite_steps.h)
};

// One optimizer step: accumulate gradients over the micro-batches, clip, AdamW.
// In fp16 the loss gradient is scaled up for backward and the gradients scaled back down,
// together with clipping, in one pass (core/train/loss_scaler.h).
// With data parallelism, each rank accumulates its share of the global batch and the ZeRO
// engine reduces the gradients over the group while backward runs (core/distributed/zero_engine.h).
// `timer` gets each phase's time; `trace` (null: none) the step's spans.
StepResult take_step(Run& run, TrainingData& data, const LrScheduleConfig& schedule, std::int64_t step,
                     PhaseTimer& timer, Tracer* trace);

// The validation loss (core/tools/eval.h): this rank's share of train.eval_batches global batches,
// forward only through the pipeline, the sums of the losses and their tokens over the loss group.
double validation_pass(Run& run, TrainingData& data);

}  // namespace ustrain
