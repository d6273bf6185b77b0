#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "app/commands.h"
#include "app/number_checks.h"
#include "app/plan_progress.h"
#include "core/plan/plan_report.h"
#include "core/plan/planner.h"
#include "core/recipe/recipe.h"

namespace ustrain::app {

void add_plan_command(CLI::App& root) {
  struct Options {
    std::string recipe;
    std::vector<std::string> overrides;
    PlanOptions plan;
    std::int64_t global_batch_tokens = 0;
    int top = 5;
    bool json = false;
    std::optional<double> peak_tflops, memory_gib, intra_gbps, inter_gbps;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = root.add_subcommand(
      "plan",
      "Find the fastest layout (dp, tp, pp, cp, ep, ZeRO, sp, recompute, micro-batch, schedule) of a recipe that fits N "
      "devices: memory from the trainer's own plan, step time predicted from the recorded step (GPU times are "
      "predictions; --gpu cpu measures this machine)");
  cmd->add_option("recipe", opt->recipe, "Recipe file (TOML); model.vocab_size must be set")->required();
  cmd->add_option("--gpus", opt->plan.devices, "Devices (GPUs, or CPU processes with --gpu cpu) to plan for")
      ->required()
      ->check(positive());
  cmd->add_option("--gpus-per-node", opt->plan.devices_per_node, "Devices of one node (tp and ep stay within one)")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--gpu", opt->plan.gpu, "The device: h100, h200, a100 (published figures) or cpu (this machine, measured)")
      ->capture_default_str()
      ->check(CLI::IsMember({"h100", "h200", "a100", "cpu"}));
  cmd->add_option("--global-batch-tokens", opt->global_batch_tokens,
                  "Tokens per optimizer step, a multiple of train.seq_len (default: the recipe's global batch)")
      ->check(positive());
  cmd->add_option("--document-tokens", opt->plan.document_tokens,
                  "With train.document_mask: the mean document length, in tokens, that attention is priced for "
                  "(default: the mean of the dataset at data.path when it is there, else one document per sequence)")
      ->check(positive());
  cmd->add_option("--top", opt->top,
                  "Layouts to list; only those whose lower bound of step time may place them among these are planned "
                  "in full")
      ->capture_default_str()
      ->check(positive());
  cmd->add_flag("--json", opt->json,
                "Print every layout as JSON, best first, those that do not fit last (every layout is planned in full: "
                "slower than the table on many devices)");
  add_set_option(*cmd, opt->overrides,
                 "; a parallel.* key (set here or in the recipe file), train.micro_batch or train.recompute set "
                 "here keeps its value, and the search covers the others");
  cmd->add_option("--peak-tflops", opt->peak_tflops, "Replace the device's dense peak, TFLOP/s")->check(positive());
  cmd->add_option("--memory-gib", opt->memory_gib, "Replace the device's memory, GiB")->check(positive());
  cmd->add_option("--intra-node-gbps", opt->intra_gbps, "Replace the bandwidth between devices of a node, GB/s each way")
      ->check(positive());
  cmd->add_option("--inter-node-gbps", opt->inter_gbps, "Replace each device's bandwidth to other nodes, GB/s each way")
      ->check(positive());
  cmd->add_option("--calibration", opt->plan.calibration,
                  "GEMM, attention and bandwidth curves measured by `ustrain bench RECIPE --calibration-out FILE` on "
                  "the device")
      ->type_name("FILE");
  cmd->callback([opt] {
    const Recipe recipe = load_recipe(opt->recipe, opt->overrides);
    PlanOptions options = opt->plan;
    options.global_batch_tokens = opt->global_batch_tokens;
    options.hardware = {opt->peak_tflops, opt->memory_gib, opt->intra_gbps, opt->inter_gbps};
    // The parallel keys the recipe file writes or --set gives, and the micro-batch and recompute
    // policy --set gives, fix their dimension; the rest are searched.
    options.fixed_keys = layout_keys_among(keys_set_by_hand(opt->recipe, opt->overrides), override_keys(opt->overrides));
    PlanProgress progress;
    options.progress = [&progress](const char* stage, std::size_t done, std::size_t layouts) {
      progress.show(stage, done, layouts);
    };
    // --json prints every layout's figures, so every layout is planned; the table only the fastest.
    options.fastest = opt->json ? 0 : static_cast<std::size_t>(opt->top);
    const Plan plan = plan_layouts(recipe, options);
    progress.finish();
    fmt::print("{}", opt->json ? plan_json(plan) : plan_text(plan, PlanCommand{opt->recipe, opt->overrides}, opt->top));
  });
}

}  // namespace ustrain::app
