// The recipe's [eval] tasks during training: loaded and checked before the first step, scored
// every eval.interval steps and after the last (core/train/task_pass.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/eval/task_rows.h"
#include "core/recipe/recipe.h"
#include "core/train/task_pass.h"

namespace ustrain {

// eval.tasks split at its commas; none when empty.
std::vector<std::string> task_paths(const EvalSection& eval);

class TaskEvals {
 public:
  // Reads every task file, tokenized with the dataset's tokenizer for rows of train.seq_len.
  // UserError for a bad file (core/eval/task_file.h) or two files of the same name.
  explicit TaskEvals(const Recipe& recipe);

  bool empty() const { return tasks_.empty(); }
  bool due(std::int64_t step) const;
  // Each task's name and score, the same on every rank.
  std::vector<std::pair<std::string, TaskScore>> run(TrainingRank& run, const RowShare& share) const;

 private:
  std::int64_t interval_, steps_;
  std::vector<ScoringTask> tasks_;
  std::vector<ScoringRows> rows_;
};

}  // namespace ustrain
