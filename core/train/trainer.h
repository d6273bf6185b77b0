// The training loop: data -> micro-batches -> forward/backward with gradient accumulation ->
// clipping -> AdamW with the LR schedule -> metrics, validation and checkpoints; resume from
// a checkpoint, and a clean stop with a checkpoint on SIGTERM, SIGUSR1 or SIGINT.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "core/recipe/recipe.h"

namespace ustrain {

struct TrainOptions {
  explicit TrainOptions(bool replace = false) : overwrite(replace) {}

  bool overwrite = false;     // replace a run directory that already holds a run
  std::string resume;         // "" (a new run), "auto" (the run's newest checkpoint, if any) or a path
  bool force_resume = false;  // resume although the recipe changed in ways that break exactness
  std::string ustrain_version = "unknown";  // recorded in checkpoints
  std::string command = "ustrain train";    // what the ranks run: all of them must run the same
  bool save_final = true;     // save the last step (a benchmark does not: its state is throwaway)
  bool measure_peak = false;  // on a CPU, measure the peak FLOP/s for MFU again (core/monitor/peak_flops.h)
  // The recipe keys the user set (keys_set_by_hand), and those of them given with --set
  // (override_keys): parallel.layout = "auto" keeps the layout keys among them (layout_keys_among).
  std::set<std::string> set_by_hand, overridden;
};

struct TrainSummary {
  std::int64_t steps = 0;       // the last step taken
  std::int64_t first_step = 1;  // the first step this process took (after a resumed checkpoint)
  std::int64_t applied_steps = 0;  // of the steps this process took, those not skipped
  int stop_signal = 0;          // the signal that stopped training before train.steps; 0 if none
  std::string checkpoint;       // the newest checkpoint, empty when none was written
  double checkpoint_stall_seconds = 0;  // time training waited for saves
  double last_train_loss = 0;
  double val_loss = 0;          // at the end; NaN when no validation ran
  double unigram_val_loss = 0;  // cross-entropy of a unigram model fitted on the train split
  double tokens_per_second = 0;
  double achieved_flops = 0;    // model FLOP/s over the whole run
  double achieved_flops_full_window = 0;  // the same counting attention as 12 L d S (torchtitan's MFU)
  double peak_flops = 0;        // MFU denominator: the peak of all devices of the job
  double phase_seconds[4] = {0, 0, 0, 0};  // data, forward, backward, optimizer
  std::size_t plan_bytes = 0;  // in the memory the model computes in: on the CPU with the host buffers
  std::size_t peak_resident_bytes = 0;
  std::size_t peak_device_bytes = 0;  // Backend::peak_device_bytes(); 0 on the CPU
};

// Chooses the layout under parallel.layout = "auto" (core/train/auto_layout.h), fills in what the
// recipe leaves to the dataset and the launch (core/recipe/recipe_defaults.h), then trains; the run directory keeps train.log and run.json (core/run/run_record.h).
TrainSummary train(const Recipe& recipe, const TrainOptions& options);

}  // namespace ustrain
