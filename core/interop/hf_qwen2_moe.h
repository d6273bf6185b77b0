// Mixture-of-experts models in the Hugging Face Qwen2-MoE layout (Qwen2MoeForCausalLM,
// model_type "qwen2_moe"). Its blocks differ from ustrain's in two ways, both written so that
// the model computes exactly what ustrain's does:
//   - q_proj, k_proj and v_proj have biases (o_proj none): written as zeros.
//   - an MoE layer has ONE shared expert (`mlp.shared_expert.{gate,up,down}_proj`, width
//     shared_expert_intermediate_size) whose output is multiplied by
//     sigmoid(`mlp.shared_expert_gate` x), a Linear(hidden, 1) without bias. ustrain's shared
//     experts (n_shared_experts of shared_expert_ffn_hidden hidden units each) are summed
//     ungated; a sum of SwiGLU MLPs is one SwiGLU MLP over their hidden units side by side,
//     which is how ustrain stores them (`mlp.shared_experts.*`, width n x w). The gate is
//     written as zeros (sigmoid(0) = 1/2 exactly) and down_proj times 2 (exact: a power of
//     two). A model without shared experts has a shared expert of width 0.
// The rest is Mixtral's with Hugging Face's Llama names: the router `mlp.gate` (softmax over
// all experts in fp32, top-k, renormalised when norm_topk_prob), the experts
// `mlp.experts.{e}.{gate,up,down}_proj` of width moe_intermediate_size, and dense layers
// `mlp.{gate,up,down}_proj` of width intermediate_size. A layer is MoE when it is not in
// mlp_only_layers and (layer + 1) % decoder_sparse_step == 0; the export lists ustrain's
// dense layers in mlp_only_layers with decoder_sparse_step = 1, and an import takes any
// pattern that ustrain's model.first_dense_layers and model.moe_layer_interval give.
// An import refuses nonzero biases (ustrain's attention has none) and a nonzero shared
// expert gate (ustrain's shared experts are ungated), and halves down_proj back.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/interop/hf_layout.h"
#include "core/recipe/recipe.h"

namespace ustrain {

// Why `model` (an MoE model) cannot be written as Qwen2-MoE, or nothing when it can.
std::optional<std::string> qwen2_moe_problem(const ModelSection& model);

// The tensors of the Qwen2-MoE model whose ustrain parameters are `params`: ustrain's
// names, with the shared experts renamed and scaled, and the zero biases and gates added.
// `qkv_bias` false leaves the biases out (a config with qkv_bias = false has none).
std::vector<HfTensor> qwen2_moe_tensors(const ParamShapes& params, const ModelSection& model, bool qkv_bias);

// config.json's Qwen2-MoE keys for `model`, added to `config`.
void write_qwen2_moe_config(const ModelSection& model, nlohmann::ordered_json& config);
// The mixture of experts a Qwen2-MoE config.json describes, into `model` (UserError naming
// `path` for what ustrain cannot hold); returns qkv_bias.
bool read_qwen2_moe_config(const nlohmann::json& config, const std::string& path, ModelSection& model);

}  // namespace ustrain
