// Which Hugging Face model a checkpoint is written as, and how ustrain's parameters map onto
// its tensors. A dense model is a Llama, or a Mistral when it attends within a sliding window
// (model.sliding_window; Mistral's tensors are Llama's); a mixture of experts is a Mixtral
// (core/interop/hf_mixtral.h, the default, with or without a window) or a Qwen2-MoE
// (core/interop/hf_qwen2_moe.h).
// A layout may hold tensors ustrain's blocks lack (Qwen2-MoE's attention biases and shared
// expert gate): they are written as the values that make the model compute what ustrain's
// does, and an import accepts only those values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/recipe/recipe.h"

namespace ustrain {

enum class HfLayout { llama, mixtral, qwen2_moe, mistral };

// config.json's model_type: "llama", "mixtral", "qwen2_moe", "mistral".
const char* hf_layout_name(HfLayout layout);
// The model's name for people: "Llama", "Mixtral", "Qwen2-MoE", "Mistral".
const char* hf_layout_title(HfLayout layout);

// Why `layout` cannot hold `model`'s blocks, or nothing when it can.
std::optional<std::string> hf_layout_problem(const ModelSection& model, HfLayout layout);

// The layout `requested` ("" picks llama for a dense model, mistral for a dense one with a
// sliding window, mixtral for an MoE one).
// UserError, naming the reason, when it cannot hold the model, or when the model's routers
// carry a balancing bias (model.router_bias_update_rate): neither layout's router has one.
HfLayout hf_layout_for_export(const ModelSection& model, const std::string& requested);

// The layers whose MLP is a mixture of experts (none for a dense model).
std::vector<std::int64_t> moe_layers(const ModelSection& model);

// One tensor of the Hugging Face model and where its values come from.
struct HfTensor {
  std::string name;                 // its Hugging Face name
  std::vector<std::int64_t> shape;
  std::string param;                // ustrain's parameter; empty: one ustrain lacks, all zeros
  float scale = 1.0f;               // Hugging Face value = scale x ustrain's (a power of two: exact)
};

// The Hugging Face tensors of a model whose parameters are `params` (name, shape), in their
// order, each followed by the tensors ustrain lacks that belong with it. `qkv_bias` false: a
// Qwen2-MoE config without attention biases (qkv_bias = false in config.json).
using ParamShapes = std::vector<std::pair<std::string, std::vector<std::int64_t>>>;
std::vector<HfTensor> hf_tensors(const ParamShapes& params, const ModelSection& model, HfLayout layout,
                                 bool qkv_bias = true);

}  // namespace ustrain
