// Continuing a run from a checkpoint: the recipe check, the model and optimizer state, the
// data position, and the run directory's bookkeeping.
#pragma once

#include <cstdint>
#include <string>

#include "core/checkpoint/dir.h"
#include "core/checkpoint/model_state.h"
#include "core/model/params.h"
#include "core/recipe/recipe.h"
#include "core/train/training_data.h"

namespace ustrain {

struct ResumedRun {
  std::int64_t step = 0;
  std::int64_t tokens_seen = 0;
  double loss_scale = 1.0;
};

// Loads `checkpoint` to continue exactly where it stopped: checks the recipe
// (core/checkpoint/compat.h; `force` lets exactness changes through), loads parameters, AdamW
// moments (what this rank holds of them, whatever layout saved them), the model state this
// rank holds (core/checkpoint/model_state.h) and the data position.
// Then, on the rank that `leads`, checkpoints of the run that lie ahead of it are moved aside
// (they belong to the abandoned continuation); the caller drops their metrics.
ResumedRun resume_training(const std::string& checkpoint, const Recipe& recipe, bool force,
                           const CheckpointDirectory& run_checkpoints, const ModelParams& params, Backend& backend,
                           TrainingData& data, bool leads, const ModelState& state = {});

// Rewrites a metrics.jsonl without the lines of steps after `step` and without lines that do
// not parse (torn by a crash or a full disk while they were written).
void drop_metrics_after(const std::string& metrics_path, std::int64_t step);

}  // namespace ustrain
