// Mixture-of-experts models in the Hugging Face Mixtral layout (MixtralForCausalLM): Llama's
// attention, and in every layer a router `block_sparse_moe.gate` (softmax over the experts,
// top-k, the chosen weights renormalised) over experts whose SwiGLU matrices are named w1
// (gate), w3 (up) and w2 (down). ustrain declares an MoE layer's tensors as
// `mlp.gate.weight` and `mlp.experts.{e}.{gate,up,down}_proj.weight`; mixtral_tensor_name
// moves names between the two (config.json: core/interop/hf_llama.h; the other MoE layout:
// core/interop/hf_qwen2_moe.h).
//
// Qwen3-MoE's attention normalises q and k and DeepSeek's uses latent attention; ustrain's
// blocks have neither, so those layouts are not offered.
#pragma once

#include <optional>
#include <string>

#include "core/recipe/recipe.h"

namespace ustrain {

// Why `model` (an MoE model) cannot be written as Mixtral, or nothing when it can.
std::optional<std::string> mixtral_problem(const ModelSection& model);

// The Mixtral name of an MoE tensor, the name itself otherwise.
std::string mixtral_tensor_name(const std::string& name);

}  // namespace ustrain
