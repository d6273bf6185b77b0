#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>

#include "app/commands.h"
#include "core/recipe.h"
#include "core/trainer.h"

namespace ustrain::app {

void add_train_command(CLI::App& root) {
  struct Options {
    std::string recipe;
    std::vector<std::string> overrides;
    bool dry_run = false;
    bool overwrite = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = root.add_subcommand("train", "Train a model from a TOML recipe");
  cmd->add_option("recipe", opt->recipe, "Recipe file (TOML); see the README's recipe reference")->required();
  cmd->add_option("--set", opt->overrides, "Override a recipe key, e.g. --set train.steps=2000 (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->add_flag("--dry-run", opt->dry_run,
                "Print the resolved recipe, parameter count and memory plan, then exit without training");
  cmd->add_flag("--overwrite", opt->overwrite, "Replace a finished run in the same run directory");
  cmd->callback([opt] {
    const Recipe recipe = load_recipe(opt->recipe, opt->overrides);
    if (opt->dry_run) {
      fmt::print("{}", describe_run(recipe));
      return;
    }
    setup_logging(recipe.log.level.c_str());
    train(recipe, TrainOptions{opt->overwrite});
  });
}

void add_recipe_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("recipe", "Recipe documentation");
  cmd->require_subcommand(1);
  cmd->add_subcommand("reference", "Print every recipe key with its type, default and meaning (Markdown)")
      ->callback([] { fmt::print("{}", recipe_reference_markdown()); });
}

}  // namespace ustrain::app
