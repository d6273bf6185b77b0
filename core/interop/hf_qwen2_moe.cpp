#include "core/interop/hf_qwen2_moe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/interop/hf_config_values.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::int64_t expert_width(const ModelSection& m) { return m.expert_ffn_hidden > 0 ? m.expert_ffn_hidden : m.ffn_hidden; }

// The shared experts' hidden units together: n_shared_experts x their width.
std::int64_t shared_width(const ModelSection& m) {
  return m.n_shared_experts * (m.shared_expert_ffn_hidden > 0 ? m.shared_expert_ffn_hidden : expert_width(m));
}

}  // namespace

std::optional<std::string> qwen2_moe_problem(const ModelSection& m) {
  if (m.router_score != "softmax")
    return "its router scores experts with a sigmoid (model.router_score); Qwen2-MoE's router uses a softmax";
  if (m.rope_scaling != "none") return "it scales RoPE (model.rope_scaling), which a Qwen2-MoE config does not carry";
  return std::nullopt;
}

std::vector<HfTensor> qwen2_moe_tensors(const ParamShapes& params, const ModelSection& m, bool qkv_bias) {
  static const std::regex projection(R"(^(model\.layers\.\d+\.self_attn\.[qkv]_proj\.)weight$)");
  static const std::regex router(R"(^(model\.layers\.\d+\.mlp\.)gate\.weight$)");
  static const std::regex shared(R"(^(model\.layers\.\d+\.mlp\.)shared_experts\.((gate|up|down)_proj\.weight)$)");
  std::vector<HfTensor> out;
  for (const auto& [name, shape] : params) {
    std::smatch match;
    if (std::regex_match(name, match, shared)) {  // x 2 on down_proj undoes the gate's 1/2
      out.push_back({match[1].str() + "shared_expert." + match[2].str(), shape, name, match[3] == "down" ? 2.0f : 1.0f});
      continue;
    }
    out.push_back({name, shape, name, 1.0f});
    if (std::regex_match(name, match, projection) && qkv_bias) out.push_back({match[1].str() + "bias", {shape[0]}, "", 1.0f});
    if (std::regex_match(name, match, router)) {  // shape (E, D)
      const std::string p = match[1].str();
      const std::int64_t d = shape[1];
      if (m.n_shared_experts == 0) {  // a shared expert of width 0 adds nothing
        out.push_back({p + "shared_expert.gate_proj.weight", {0, d}, "", 1.0f});
        out.push_back({p + "shared_expert.up_proj.weight", {0, d}, "", 1.0f});
        out.push_back({p + "shared_expert.down_proj.weight", {d, 0}, "", 1.0f});
      }
      out.push_back({p + "shared_expert_gate.weight", {1, d}, "", 1.0f});
    }
  }
  return out;
}

void write_qwen2_moe_config(const ModelSection& m, nlohmann::ordered_json& j) {
  const std::vector<std::int64_t> moe = moe_layers(m);
  std::vector<std::int64_t> dense;
  for (std::int64_t l = 0; l < m.n_layers; ++l)
    if (std::find(moe.begin(), moe.end(), l) == moe.end()) dense.push_back(l);
  j["num_experts"] = m.n_experts;
  j["num_experts_per_tok"] = m.experts_per_token;
  j["moe_intermediate_size"] = expert_width(m);
  j["shared_expert_intermediate_size"] = shared_width(m);
  j["norm_topk_prob"] = m.router_renormalize;
  j["decoder_sparse_step"] = 1;  // with the dense layers listed: any pattern ustrain has
  j["mlp_only_layers"] = dense;
  j["router_aux_loss_coef"] = 0.0;
  j["output_router_logits"] = false;
  j["qkv_bias"] = true;  // the zero biases are written: older transformers always expects them
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["max_window_layers"] = m.n_layers;
}

bool read_qwen2_moe_config(const nlohmann::json& j, const std::string& path, ModelSection& m) {
  const auto refuse = [&](const std::string& what) {
    throw UserError(fmt::format("{}: {}; ustrain's mixture of experts cannot hold it, so this model cannot be imported",
                                path, what));
  };
  if (j.value("use_sliding_window", false)) refuse("use_sliding_window is true");
  m.n_experts = config_integer(j, "num_experts", path, 0);
  m.experts_per_token = config_integer(j, "num_experts_per_tok", path, 1);
  m.expert_ffn_hidden = config_integer(j, "moe_intermediate_size", path, 1);
  const std::int64_t shared = config_integer(j, "shared_expert_intermediate_size", path, 0);
  m.n_shared_experts = shared > 0 ? 1 : 0;  // one shared expert of that width
  m.shared_expert_ffn_hidden = shared > 0 ? shared : 0;
  m.router_renormalize = j.value("norm_topk_prob", false);
  const std::int64_t step = config_integer_or(j, "decoder_sparse_step", 1, path, 1);
  const std::vector<std::int64_t> mlp_only = config_integers(j, "mlp_only_layers", path);
  std::vector<std::int64_t> sparse;
  for (std::int64_t l = 0; l < m.n_layers; ++l)
    if (m.n_experts > 0 && (l + 1) % step == 0 && std::find(mlp_only.begin(), mlp_only.end(), l) == mlp_only.end())
      sparse.push_back(l);
  if (sparse.empty()) refuse("no layer is a mixture of experts (num_experts, decoder_sparse_step, mlp_only_layers)");
  m.first_dense_layers = sparse[0];
  m.moe_layer_interval = sparse.size() > 1 ? sparse[1] - sparse[0] : m.n_layers - sparse[0];
  if (moe_layers(m) != sparse)
    refuse(fmt::format("its MoE layers ({}) follow no pattern of ustrain's model.first_dense_layers and "
                       "model.moe_layer_interval (every n-th layer after the first dense ones)",
                       fmt::join(sparse, ", ")));
  return j.value("qkv_bias", true);
}

}  // namespace ustrain
