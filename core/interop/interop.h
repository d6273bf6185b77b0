// `ustrain ckpt export` and `ustrain ckpt import`: moving models between ustrain checkpoints
// and Hugging Face safetensors models: Llama and Mistral (core/interop/hf_llama.h), and
// mixtures of experts as Mixtral or Qwen2-MoE (core/interop/hf_layout.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/recipe/recipe.h"

namespace ustrain {

struct ExportOptions {
  std::string checkpoint;   // a checkpoint or run directory
  std::string output_dir;   // created; must not exist or be empty
  std::string dtype = "fp32";  // fp32 | bf16 (rounded to nearest even)
  std::uint64_t max_shard_bytes = 5'000'000'000;  // larger models are split into shards plus an index
  // llama | mistral | mixtral | qwen2_moe; empty: llama, mistral for a dense model with a
  // sliding window, or mixtral for an MoE model
  std::string layout;
};

struct InteropReport {
  std::string output_dir;
  std::int64_t tensors = 0;
  std::uint64_t bytes = 0;  // tensor bytes written
  int files = 0;            // safetensors files written
  std::string tokenizer;    // the tokenizer kept (TokenizerIdentity::describe), or why there is none
  std::vector<std::string> tokenizer_files;  // export: the tokenizer files written
};

// Writes the checkpoint's weights as a Hugging Face model in `layout`: config.json (with the
// tokenizer's special ids) and generation_config.json, model.safetensors or
// model-0000i-of-0000n.safetensors with model.safetensors.index.json, and for a
// sentencepiece tokenizer its Hugging Face files (core/interop/hf_tokenizer.h). Tied
// embeddings are written once (no lm_head.weight), as Hugging Face expects. A checkpoint
// whose tokenizer cannot be found (an older one whose dataset is gone) is exported without
// tokenizer files or ids, and `tokenizer` says why.
InteropReport export_checkpoint(const ExportOptions& options);

struct ImportOptions {
  std::string source;       // .safetensors file, index JSON, or a model directory
  std::string output_dir;   // the ustrain checkpoint to create; must not exist or be empty
  Recipe recipe;            // its [model] must fit the weights; [data] is optional
  std::string ustrain_version;
  std::string tokenizer = "auto";  // auto | byte | none | FILE.model (core/interop/hf_tokenizer.h)
};

// Converts a Hugging Face Llama, Mistral, Mixtral or Qwen2-MoE model (config.json's model_type; without
// one, Llama for a dense recipe and for an MoE one Qwen2-MoE when its tensors are named so,
// else Mixtral) into a weights-only ustrain checkpoint at step 0, the starting point of a run
// with checkpoint.init_from = OUTPUT, keeping its tokenizer (import_tokenizer). Checks
// config.json (when present) against the recipe's [model] and every tensor's name, shape and,
// for the tensors ustrain lacks, value; converts BF16, F16 and F32 to float32.
InteropReport import_hf_model(const ImportOptions& options);

}  // namespace ustrain
