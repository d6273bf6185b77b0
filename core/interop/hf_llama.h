// Hugging Face models on disk: config.json (Llama, and the MoE layouts of
// core/interop/hf_layout.h), and the safetensors files that hold the
// weights (one model.safetensors, or shards listed by model.safetensors.index.json).
//
// Tensor names and layouts are the same in ustrain and Hugging Face: ustrain declares its
// parameters under the Hugging Face names, stores linear weights as (out, in), and applies
// RoPE in the rotate-half layout Hugging Face Llama uses, so q_proj and k_proj need no
// permutation in either direction.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/interop/hf_layout.h"
#include "core/recipe/recipe.h"

namespace ustrain {

// The special token ids config.json and generation_config.json carry; absent ones are not
// written (Hugging Face then assumes its own defaults, which fit no ustrain tokenizer).
struct HfTokenIds {
  std::optional<std::int64_t> bos, eos, pad;

  bool operator==(const HfTokenIds&) const = default;
};

// config.json for `model` in `layout` (LlamaForCausalLM, MistralForCausalLM with its
// sliding_window, MixtralForCausalLM or Qwen2MoeForCausalLM; UserError when the layout cannot
// hold the model). `torch_dtype` is
// "float32" or "bfloat16". llama_config_json picks the default layout (hf_layout_for_export).
std::string hf_config_json(const ModelSection& model, HfLayout layout, const std::string& torch_dtype,
                           const HfTokenIds& ids);
std::string llama_config_json(const ModelSection& model, const std::string& torch_dtype, const HfTokenIds& ids);

// What a config.json of model_type llama, mistral, mixtral or qwen2_moe describes: the [model]
// section (rope_scaling of type llama3 and Mistral's and Mixtral's sliding_window included,
// null meaning none), the layout, and for Qwen2-MoE whether its attention has biases.
// UserError naming `path` for another model type or for features ustrain lacks (Llama biases,
// another rope_scaling type, an activation other than silu, head_dim other than hidden_size /
// num_attention_heads, Qwen2-MoE's sliding windows), or a sliding_window that is not a
// positive integer or null.
struct HfConfig {
  ModelSection model;
  HfLayout layout = HfLayout::llama;
  bool qkv_bias = false;
};
HfConfig read_hf_config(const std::string& json_text, const std::string& path);
ModelSection model_from_llama_config(const std::string& json_text, const std::string& path);
// The token ids a config.json gives as single integers (a list of EOS ids is not read).
HfTokenIds token_ids_from_llama_config(const std::string& json_text, const std::string& path);

struct HfModelFiles {
  std::vector<std::string> files;                  // safetensors files, paths
  std::map<std::string, std::string> weight_map;   // tensor name -> file path (sharded models)
  std::optional<std::string> config;               // config.json path when present
  std::optional<std::string> tokenizer_model;      // tokenizer.model (sentencepiece) when present
  std::optional<std::string> tokenizer_json;       // tokenizer.json (Hugging Face tokenizers) when present
};

// Finds a model's files from a .safetensors file, a model.safetensors.index.json, or a
// directory holding either. UserError when nothing is found or a shard the index lists is
// missing.
HfModelFiles locate_hf_model(const std::string& path);

// True when `path` looks like a Hugging Face model rather than a ustrain checkpoint.
bool is_hf_model(const std::string& path);

}  // namespace ustrain
