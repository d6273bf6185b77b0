#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>

#include "app/commands.h"
#include "core/recipe/recipe.h"
#include "core/run/signals.h"
#include "core/train/describe_run.h"
#include "core/train/trainer.h"
#include "kernels/error.h"

namespace ustrain::app {

void add_train_command(CLI::App& root) {
  struct Options {
    std::string recipe;
    std::vector<std::string> overrides;
    bool dry_run = false;
    bool overwrite = false;
    std::string resume;
    bool force_resume = false;
    bool measure_peak = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = root.add_subcommand("train", "Train a model from a TOML recipe");
  cmd->add_option("recipe", opt->recipe, "Recipe file (TOML); see docs/recipes.md for every key")->required();
  add_set_option(*cmd, opt->overrides);
  cmd->add_flag("--dry-run", opt->dry_run,
                "Make the checks training makes first (data, device.threads, (CPU) memory), print the resolved "
                "recipe (with parallel.layout = auto, the layout the planner chooses), parameter count and memory "
                "plan (and, without a launcher, how to start a layout of several ranks), then exit without "
                "training or writing");
  cmd->add_flag("--overwrite", opt->overwrite,
                "Replace the run (metrics and checkpoints) in the same run directory");
  cmd->add_option("--resume", opt->resume,
                  "Continue from a checkpoint: auto (the run directory's newest, or a fresh start when there "
                  "is none) or a checkpoint or run directory")
      ->type_name("auto|PATH");
  cmd->add_flag("--force-resume", opt->force_resume,
                "Resume although the recipe changed in ways that break exact continuation (seed, data, "
                "batch, optimizer, ...)");
  cmd->add_flag("--measure-peak", opt->measure_peak,
                "On a CPU, measure the peak FLOP/s that MFU divides by again and keep the new value (it is "
                "measured once per CPU model and thread count and kept in $XDG_CACHE_HOME/ustrain, else "
                "~/.cache/ustrain)");
  cmd->callback([opt] {
    const Recipe recipe = load_recipe(opt->recipe, opt->overrides);
    if (opt->dry_run) {
      fmt::print("{}", describe_run(recipe, TrainCommand{opt->recipe, opt->overrides}));
      return;
    }
    if (opt->force_resume && opt->resume.empty()) throw UserError("--force-resume needs --resume");
    if (opt->overwrite && !opt->resume.empty()) throw UserError("--overwrite and --resume exclude each other");
    setup_logging(recipe.log.level.c_str());
    TrainOptions options(opt->overwrite);
    options.resume = opt->resume;
    options.force_resume = opt->force_resume;
    options.measure_peak = opt->measure_peak;
    options.set_by_hand = keys_set_by_hand(opt->recipe, opt->overrides);
    options.overridden = override_keys(opt->overrides);
    options.ustrain_version = USTRAIN_VERSION;
    if (train(recipe, options).stop_signal != 0) throw ExitStatus{kExitStopped};
  });
}

void add_recipe_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("recipe", "Recipe documentation");
  cmd->require_subcommand(1);
  cmd->add_subcommand("reference", "Print every recipe key with its type, default and meaning (Markdown)")
      ->callback([] { fmt::print("{}", recipe_reference_markdown()); });
}

}  // namespace ustrain::app
