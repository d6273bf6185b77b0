// `ustrain eval --task`: a checkpoint's accuracy on a multiple-choice task file
// (core/eval/task_file.h), the whole model on one process.
#pragma once

#include <cstdint>
#include <string>

#include "core/eval/task_rows.h"
#include "core/recipe/recipe.h"

namespace ustrain {

struct TaskEvalResult {
  std::string task;        // the task's name
  TaskScore score;
  std::int64_t truncated = 0;  // items whose context was cut from the left
  std::int64_t step = 0;       // the checkpoint's step
  std::string checkpoint;      // the directory that was evaluated
  double seconds = 0;          // scoring time, loading excluded
};

// Loads the checkpoint's weights into the recipe's model (rows of train.seq_len tokens,
// train.micro_batch rows per forward) and scores the task tokenized with the checkpoint's
// tokenizer. UserError for a bad task file or a checkpoint of another model shape.
TaskEvalResult evaluate_task(const Recipe& recipe, const std::string& checkpoint, const std::string& task_path);

// {"task": name, "n": items, "acc": ..., "acc_norm": ...} on one line.
std::string task_result_json(const TaskEvalResult& result);

}  // namespace ustrain
