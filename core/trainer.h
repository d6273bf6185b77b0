// The training loop: data -> micro-batches -> forward/backward with gradient accumulation ->
// clipping -> AdamW with the LR schedule -> metrics, validation and the final weights.
#pragma once

#include <cstdint>
#include <string>

#include "core/recipe.h"

namespace ustrain {

struct TrainOptions {
  bool overwrite = false;  // allow a run directory that already holds a run's metrics
};

struct TrainSummary {
  std::int64_t steps = 0;
  double last_train_loss = 0;
  double val_loss = 0;          // at the end; NaN when no validation ran
  double unigram_val_loss = 0;  // cross-entropy of a unigram model fitted on the train split
  double tokens_per_second = 0;
  double achieved_flops = 0;    // model FLOP/s over the whole run
  double peak_flops = 0;        // MFU denominator
  double phase_seconds[4] = {0, 0, 0, 0};  // data, forward, backward, optimizer
  std::size_t plan_bytes = 0;
  std::size_t peak_resident_bytes = 0;
};

TrainSummary train(const Recipe& recipe, const TrainOptions& options);

// What `--dry-run` prints: the resolved recipe, parameter count and the memory plan.
std::string describe_run(const Recipe& recipe);

}  // namespace ustrain
