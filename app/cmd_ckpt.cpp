#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <limits>
#include <memory>

#include "app/commands.h"
#include "app/number_checks.h"
#include "core/interop/inspect.h"
#include "core/interop/interop.h"
#include "core/recipe/recipe.h"
#include "kernels/byte_text.h"

namespace ustrain::app {
namespace {

void add_inspect(CLI::App& ckpt) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = ckpt.add_subcommand(
      "inspect", "Print a checkpoint's step, tensors and recipe, or a Hugging Face model's tensors and config");
  cmd->add_option("path", *path, "Checkpoint, run directory, or Hugging Face safetensors model")->required();
  cmd->callback([path] { fmt::print("{}", inspect(*path)); });
}

void add_export(CLI::App& ckpt) {
  struct Options {
    ExportOptions e;
    std::string format = "safetensors";
    double max_shard_gb = 5.0;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = ckpt.add_subcommand(
      "export", "Write a checkpoint's weights as a Hugging Face Llama, Mistral, Mixtral or Qwen2-MoE model (safetensors, "
                "config.json, generation_config.json, and a sentencepiece or tokenizer.json tokenizer's files)");
  cmd->add_option("path", opt->e.checkpoint, "Checkpoint or run directory")->required();
  cmd->add_option("output", opt->e.output_dir, "Directory to create (must not exist or be empty)")->required();
  cmd->add_option("--format", opt->format, "Output format")->check(CLI::IsMember({"safetensors"}))->capture_default_str();
  cmd->add_option("--dtype", opt->e.dtype, "Tensor type: fp32 (exact) or bf16 (rounded to nearest even)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--layout", opt->e.layout,
                  "Hugging Face model to write: llama or mistral (dense models), mixtral or qwen2_moe (mixtures of "
                  "experts); default llama, mistral for a dense model with a sliding window, or mixtral for a mixture "
                  "of experts")
      ->check(CLI::IsMember({"llama", "mistral", "mixtral", "qwen2_moe"}));
  cmd->add_option("--max-shard-gb", opt->max_shard_gb, "Split into shards with an index above this size (GB)")
      ->check(positive())
      ->capture_default_str();
  cmd->callback([opt] {
    ExportOptions e = opt->e;
    // Any size beyond 64-bit byte counts is no limit at all (a cast of it would be undefined).
    const double bytes = opt->max_shard_gb * 1e9;
    e.max_shard_bytes = bytes < 0x1p64 ? static_cast<std::uint64_t>(bytes) : std::numeric_limits<std::uint64_t>::max();
    const InteropReport r = export_checkpoint(e);
    fmt::print("exported {} tensors ({}, {}) in {} file(s) to {}\n", r.tensors,
               format_gigabytes(static_cast<double>(r.bytes), 3),
               e.dtype, r.files, r.output_dir);
    fmt::print("tokenizer: {}{}\n", r.tokenizer,
               r.tokenizer_files.empty() ? std::string(" (no Hugging Face tokenizer files; see docs/checkpoints.md)")
                                         : fmt::format("; wrote {}", fmt::join(r.tokenizer_files, ", ")));
  });
}

void add_import(CLI::App& ckpt) {
  struct Options {
    std::string source, output, recipe, tokenizer = "auto";
    std::vector<std::string> overrides;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = ckpt.add_subcommand(
      "import", "Turn a Hugging Face Llama, Mistral, Mixtral or Qwen2-MoE safetensors model (config.json's model_type) into "
                "a checkpoint that starts a run (checkpoint.init_from = OUTPUT)");
  cmd->add_option("source", opt->source, "model.safetensors, model.safetensors.index.json, or their directory")
      ->required();
  cmd->add_option("output", opt->output, "Checkpoint directory to create (must not exist or be empty)")->required();
  cmd->add_option("--recipe", opt->recipe,
                  "Recipe whose [model] matches the weights (config.json is checked against it); [data] is optional")
      ->required();
  cmd->add_option("--tokenizer", opt->tokenizer,
                  "Tokenizer the checkpoint keeps: auto (tokenizer.model beside the weights, else tokenizer.json "
                  "there, else what the recipe's [data] says, else byte for a model ustrain exported with it), "
                  "byte, none, a sentencepiece FILE.model or a tokenizer.json")
      ->capture_default_str();
  add_set_option(*cmd, opt->overrides);
  cmd->callback([opt] {
    const InteropReport r = import_hf_model({opt->source, opt->output,
                                             load_recipe(opt->recipe, opt->overrides, RecipeUse::model),
                                             USTRAIN_VERSION, opt->tokenizer});
    fmt::print("imported {} tensors ({} as fp32) into {}; start a run from it with checkpoint.init_from = "
               "\"{}\"\ntokenizer: {}\n",
               r.tensors, format_gigabytes(static_cast<double>(r.bytes), 3), r.output_dir, r.output_dir, r.tokenizer);
  });
}

}  // namespace

void add_ckpt_command(CLI::App& root) {
  CLI::App* ckpt = root.add_subcommand("ckpt", "Inspect checkpoints; export to and import from Hugging Face safetensors");
  ckpt->require_subcommand(1);
  add_inspect(*ckpt);
  add_export(*ckpt);
  add_import(*ckpt);
}

}  // namespace ustrain::app
