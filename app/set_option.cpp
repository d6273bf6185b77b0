#include <CLI/CLI.hpp>

#include "app/commands.h"

namespace ustrain::app {

void add_set_option(CLI::App& cmd, std::vector<std::string>& overrides, const std::string& also) {
  cmd.add_option("--set", overrides,
                 "Override a recipe key with a TOML value, e.g. --set train.steps=2000 (repeatable)" + also)
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace ustrain::app
