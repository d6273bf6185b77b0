#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "app/commands.h"
#include "app/number_checks.h"
#include "core/tools/generate.h"
#include "kernels/error.h"

namespace ustrain::app {

void add_generate_command(CLI::App& root) {
  auto opt = std::make_shared<GenerateOptions>();
  auto samples = std::make_shared<int>(1);
  CLI::App* cmd = root.add_subcommand("generate", "Sample text from a checkpoint's weights");
  CLI::Option* checkpoint = cmd->add_option("--checkpoint", opt->checkpoint,
                                            "Checkpoint directory (its saved recipe gives the model's shape)");
  CLI::Option* run = cmd->add_option("--run", opt->run_dir,
                                     "Run directory written by `ustrain train`: samples from its newest checkpoint");
  checkpoint->excludes(run);
  run->excludes(checkpoint);
  cmd->add_option("--prompt", opt->prompt, "Text to continue (default: start a new document)");
  cmd->add_option("--tokens", opt->tokens, "Maximum number of new tokens per sample")->capture_default_str();
  cmd->add_option("--temperature", opt->temperature, "Sampling temperature; 0 = greedy")
      ->capture_default_str()->check(non_negative());
  cmd->add_option("--top-k", opt->top_k, "Sample among the k most likely tokens; 0 = all")
      ->capture_default_str()->check(non_negative());
  cmd->add_option("--seed", opt->seed, "Random seed for sampling")->capture_default_str();
  cmd->add_option("--samples", *samples, "Number of samples to print")->capture_default_str()->check(positive());
  cmd->callback([opt, samples] {
    if (opt->checkpoint.empty() && opt->run_dir.empty())
      throw UserError("generate needs --checkpoint PATH or --run DIR");
    bool warned = false;  // about the context, once
    for (int i = 0; i < *samples; ++i) {
      GenerateOptions o = *opt;
      o.seed = opt->seed + static_cast<std::uint64_t>(i);
      // The prompt is printed once the model is loaded and the first text arrives, so that an
      // error (a bad checkpoint) is not glued to it on the terminal.
      bool started = false;
      const auto start = [&] {
        if (started) return;
        started = true;
        if (*samples > 1) fmt::print("--- sample {} ---\n", i + 1);
        fmt::print("{}", o.prompt);
      };
      const GeneratedText out = generate_text(o, [&](const std::string& piece) {
        start();
        fmt::print("{}", piece);
        std::fflush(stdout);
      });
      start();
      fmt::print("\n");
      std::fflush(stdout);
      if (out.past_context > 0 && !warned) {
        warned = true;
        fmt::print(stderr,
                   "warning: the prompt and the text passed model.max_seq_len = {} tokens: the last {} new "
                   "token{} saw only the {} tokens before {}, the longest context this model was trained on; "
                   "ask for fewer --tokens or a shorter --prompt to stay within it\n",
                   out.context, out.past_context, out.past_context == 1 ? "" : "s", out.context,
                   out.past_context == 1 ? "it" : "them");
      }
    }
  });
}

}  // namespace ustrain::app
