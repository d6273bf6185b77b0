#include "core/tools/task_eval.h"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "core/checkpoint/locate.h"
#include "core/checkpoint/reader.h"
#include "core/checkpoint/tokenizer.h"
#include "core/eval/choice_scores.h"
#include "core/recipe/recipe_defaults.h"
#include "core/tools/eval.h"
#include "core/step/model_instance.h"
#include "core/step/router_balance.h"

namespace ustrain {

TaskEvalResult evaluate_task(const Recipe& given, const std::string& checkpoint_path, const std::string& task_path) {
  const Recipe recipe = with_launch_defaults(with_dataset_defaults(given), dry_run_launch(given, ProcessInfo{}));
  const auto& t = recipe.train;
  TaskEvalResult result;
  result.checkpoint = locate_checkpoint(checkpoint_path);
  const CheckpointReader checkpoint(result.checkpoint);
  warn_model_changes(checkpoint, recipe);
  // The task first: a bad file is reported before the weights are loaded.
  const std::unique_ptr<Tokenizer> tokenizer =
      make_tokenizer(checkpoint_tokenizer(checkpoint), "checkpoint " + checkpoint.dir());
  if (tokenizer->vocab_size() > recipe.model.vocab_size)
    throw UserError(fmt::format("the checkpoint's tokenizer has {} tokens but the recipe's model only {}",
                                tokenizer->vocab_size(), recipe.model.vocab_size));
  const ScoringTask task = load_task(task_path, *tokenizer, t.seq_len);
  const ScoringRows rows = scoring_rows(task, t.seq_len);
  ModelInstance instance(recipe, ModelGeometry::of(recipe.model, {}, t.seq_len), t.micro_batch, Recompute::none);
  load_model_state(checkpoint, instance.model.params(), *instance.backend, /*with_optimizer=*/false,
                   model_state_of(instance.model, *instance.backend, false));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<double> log_probs = choice_log_probs(instance.model, *instance.backend, rows, t.micro_batch);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.task = task.name;
  result.score = task_score(task, log_probs);
  result.truncated = task.truncated;
  result.step = checkpoint.manifest().step;
  return result;
}

std::string task_result_json(const TaskEvalResult& r) {
  const nlohmann::ordered_json out{{"task", r.task}, {"n", r.score.n}, {"acc", r.score.acc}, {"acc_norm", r.score.acc_norm}};
  return out.dump();
}

}  // namespace ustrain
