// Scoring a task's rows (core/eval/task_rows.h) with the model as the run holds it, under any
// layout: forward only through the validation pipeline, as the validation pass runs.
#pragma once

#include <vector>

#include "core/eval/task_rows.h"
#include "core/step/training_step.h"
#include "parallel/context_split.h"

namespace ustrain {

// Where this rank reads its rows: data-parallel reader `reader` of `readers`, holding the
// `context` part of every row.
struct RowShare {
  int reader = 0, readers = 1;
  ContextSplit context;
};

// The log-probability of every row's choice (rows.seq = train.seq_len), the same on every
// rank. The rows go in rounds of every reader's validation micro-batches; each rank adds the
// losses of the tokens it computed and the loss group sums them.
std::vector<double> task_pass(TrainingRank& run, const ScoringRows& rows, const RowShare& share);

}  // namespace ustrain
