#include <CLI/CLI.hpp>

#include <memory>

#include "app/commands.h"
#include "app/number_checks.h"
#include "core/tools/bench.h"
#include "core/recipe/recipe.h"

namespace ustrain::app {

void add_bench_command(CLI::App& root) {
  struct Options {
    std::string recipe;
    std::vector<std::string> overrides;
    std::int64_t steps = 10;
    std::string calibration_out;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = root.add_subcommand(
      "bench",
      "Measure GEMM throughput at the recipe's shapes and precision, then train a few steps (no checkpoint) and "
      "print tokens/s, MFU and peak memory against the plan");
  cmd->add_option("recipe", opt->recipe, "Recipe file (TOML)")->required();
  add_set_option(*cmd, opt->overrides);
  cmd->add_option("--steps", opt->steps, "Training steps to time, after one more that warms up and is not timed")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--calibration-out", opt->calibration_out,
                  "Also measure the device's GEMM, attention and memory-bandwidth curves and write them to FILE for "
                  "`ustrain plan --calibration FILE`")
      ->type_name("FILE");
  cmd->callback([opt] {
    Recipe recipe = load_recipe(opt->recipe, opt->overrides);
    setup_logging(recipe.log.level.c_str());
    run_bench(recipe, opt->steps, opt->calibration_out);
  });
}

}  // namespace ustrain::app
