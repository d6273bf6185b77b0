// Scoring a task's rows with the whole model on one process (`ustrain eval --task`).
#pragma once

#include <cstdint>
#include <vector>

#include "core/eval/task_rows.h"
#include "core/model/llama.h"

namespace ustrain {

// Sum of the row's per-token losses (in double, in token order), negated: the log-probability
// of its choice given its context.
double row_log_prob(const float* losses, std::int64_t tokens);

// The log-probability of every row's choice, `micro_batch` rows per forward, each forward only
// as long as its longest row. `model` holds the whole model, planned for micro-batches of at
// least `micro_batch` sequences of at least rows.seq tokens.
std::vector<double> choice_log_probs(LlamaModel& model, Backend& backend, const ScoringRows& rows,
                                     std::int64_t micro_batch);

}  // namespace ustrain
