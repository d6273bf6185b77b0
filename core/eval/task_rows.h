// A task's items as rows a model scores: one row per (item, choice), the context's tokens and
// the choice's, whose per-token losses add up to minus the choice's log-probability.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/eval/task_file.h"

namespace ustrain {

struct ScoringRows {
  std::int64_t seq = 0;                    // tokens per row
  std::vector<std::int32_t> ids;           // (rows, seq) input tokens, padded with 0
  std::vector<std::int32_t> targets;       // (rows, seq): the next token where it is a choice's, else -1
  std::vector<std::int64_t> lengths;       // per row: the inputs it uses (the rest is padding)
  std::int64_t rows() const { return static_cast<std::int64_t>(lengths.size()); }
};

// The rows of every choice of every item in order, `seq` tokens each: context + choice without
// its last token as inputs, the choice's tokens as targets. A context + choice of more than
// seq + 1 tokens keeps the end of its context (lm-evaluation-harness's left truncation).
ScoringRows scoring_rows(const ScoringTask& task, std::int64_t seq);

struct TaskScore {
  std::int64_t n = 0;   // items
  double acc = 0;       // items whose most likely choice is the answer
  double acc_norm = 0;  // the same with each log-probability divided by its choice's UTF-8 bytes
};

// Accuracies from the log-probabilities of every choice in the order of scoring_rows(). A tie
// goes to the first best choice.
TaskScore task_score(const ScoringTask& task, std::span<const double> log_probs);

}  // namespace ustrain
