#include "core/train/task_evals.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "core/checkpoint/tokenizer.h"
#include "kernels/error.h"

namespace ustrain {

std::vector<std::string> task_paths(const EvalSection& eval) {
  std::vector<std::string> paths;
  for (std::size_t begin = 0; begin <= eval.tasks.size() && !eval.tasks.empty();) {
    std::size_t end = eval.tasks.find(',', begin);
    if (end == std::string::npos) end = eval.tasks.size();
    if (end > begin) paths.push_back(eval.tasks.substr(begin, end - begin));
    begin = end + 1;
  }
  return paths;
}

TaskEvals::TaskEvals(const Recipe& recipe) : interval_(recipe.eval.interval), steps_(recipe.train.steps) {
  const std::vector<std::string> paths = task_paths(recipe.eval);
  if (paths.empty()) return;
  const std::unique_ptr<Tokenizer> tokenizer =
      make_tokenizer(dataset_tokenizer_snapshot(recipe.data), "the training data's tokenizer");
  for (const std::string& path : paths) {
    ScoringTask task = load_task(path, *tokenizer, recipe.train.seq_len);
    for (const ScoringTask& other : tasks_)
      if (other.name == task.name)
        throw UserError(fmt::format("eval.tasks: {} and {} are both named {} in the metrics; rename one of them",
                                    other.path, path, task.name));
    if (task.truncated > 0)
      spdlog::info("task {}: the context of {} of {} items is cut from the left to fit train.seq_len = {}",
                   task.name, task.truncated, task.items.size(), recipe.train.seq_len);
    rows_.push_back(scoring_rows(task, recipe.train.seq_len));
    tasks_.push_back(std::move(task));
  }
}

bool TaskEvals::due(std::int64_t step) const {
  return !tasks_.empty() && ((interval_ > 0 && step % interval_ == 0) || step == steps_);
}

std::vector<std::pair<std::string, TaskScore>> TaskEvals::run(TrainingRank& run, const RowShare& share) const {
  std::vector<std::pair<std::string, TaskScore>> scores;
  for (std::size_t t = 0; t < tasks_.size(); ++t)
    scores.emplace_back(tasks_[t].name, task_score(tasks_[t], task_pass(run, rows_[t], share)));
  return scores;
}

}  // namespace ustrain
