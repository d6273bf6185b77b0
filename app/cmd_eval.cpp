#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>

#include "app/commands.h"
#include "app/number_checks.h"
#include "core/checkpoint/locate.h"
#include "core/tools/eval.h"
#include "core/tools/task_eval.h"
#include "core/recipe/recipe.h"
#include "kernels/error.h"

namespace ustrain::app {
namespace {

void print_task_result(const TaskEvalResult& r, bool json) {
  if (json) {
    fmt::print("{}\n", task_result_json(r));
    return;
  }
  fmt::print("checkpoint {} (step {}): task {} | acc {:.4f} | acc_norm {:.4f} | {} items ({:.1f} items/s)\n",
             r.checkpoint, r.step, r.task, r.score.acc, r.score.acc_norm, r.score.n,
             static_cast<double>(r.score.n) / r.seconds);
  if (r.truncated > 0)
    fmt::print("{} of {} items were longer than train.seq_len: their context was cut from the left\n", r.truncated,
               r.score.n);
}

}  // namespace

void add_eval_command(CLI::App& root) {
  struct Options {
    std::string recipe;
    std::string run_dir;
    std::vector<std::string> overrides;
    EvalOptions eval;
    std::string task;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = root.add_subcommand(
      "eval", "Validation loss and perplexity of a checkpoint's weights on the recipe's dataset, or with --task "
              "its accuracy on a multiple-choice task");
  cmd->add_option("recipe", opt->recipe,
                  "Recipe file (TOML): dataset, model shape, batch and sequence sizes (default with --run: the "
                  "run's recipe.toml)");
  CLI::Option* checkpoint = cmd->add_option("--checkpoint", opt->eval.checkpoint,
                                            "Checkpoint directory, or a run directory (its newest)");
  CLI::Option* run = cmd->add_option("--run", opt->run_dir,
                                     "Run directory written by `ustrain train`: evaluates its newest checkpoint");
  checkpoint->excludes(run);
  run->excludes(checkpoint);
  cmd->add_option("--batches", opt->eval.batches, "Validation batches of train.global_batch sequences to evaluate (default: train.eval_batches)")
      ->check(positive());
  CLI::Option* task = cmd->add_option("--task", opt->task,
                                      "Multiple-choice task file (JSONL, one {\"context\", \"choices\", \"answer\"} "
                                      "item a line): prints acc and acc_norm instead of the validation loss");
  task->excludes("--batches");
  cmd->add_flag("--json", opt->json, "With --task: print one JSON object {task, n, acc, acc_norm}")->needs(task);
  add_set_option(*cmd, opt->overrides);
  cmd->callback([opt] {
    if (opt->eval.checkpoint.empty() && opt->run_dir.empty())
      throw UserError("eval needs --checkpoint PATH or --run DIR");
    if (opt->recipe.empty() && opt->run_dir.empty())
      throw UserError("eval needs a RECIPE with --checkpoint (or --run DIR, whose recipe.toml it takes)");
    if (!opt->run_dir.empty()) {
      opt->eval.checkpoint = locate_run_checkpoint(opt->run_dir);
      if (opt->recipe.empty()) opt->recipe = opt->run_dir + "/recipe.toml";
    }
    const Recipe recipe = load_recipe(opt->recipe, opt->overrides);
    setup_logging(recipe.log.level.c_str());
    if (!opt->task.empty()) {
      print_task_result(evaluate_task(recipe, opt->eval.checkpoint, opt->task), opt->json);
      return;
    }
    const EvalResult r = evaluate_checkpoint(recipe, opt->eval);
    // The loss is printed with every digit a double needs to read back exactly.
    fmt::print("checkpoint {} (step {}): validation loss {} | perplexity {:.4f} | {} tokens\n", r.checkpoint, r.step,
               r.loss, r.perplexity, r.tokens);
  });
}

}  // namespace ustrain::app
