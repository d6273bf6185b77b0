#include "core/interop/hf_mixtral.h"

#include <regex>

namespace ustrain {

std::optional<std::string> mixtral_problem(const ModelSection& m) {
  if (m.n_shared_experts > 0) return "it has shared experts, which Mixtral lacks";
  if (m.first_dense_layers > 0 || m.moe_layer_interval > 1) return "some of its layers are dense; Mixtral's are all MoE";
  if (m.router_score != "softmax" || !m.router_renormalize)
    return "its router is not softmax with renormalised top-k weights, as Mixtral's is";
  if (m.rope_scaling != "none") return "it scales RoPE (model.rope_scaling), which a Mixtral config does not carry";
  return std::nullopt;
}

std::string mixtral_tensor_name(const std::string& name) {
  static const std::regex router(R"(^(model\.layers\.\d+\.)mlp\.gate\.weight$)");
  static const std::regex expert(R"(^(model\.layers\.\d+\.)mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$)");
  std::smatch match;
  if (std::regex_match(name, match, router)) return match[1].str() + "block_sparse_moe.gate.weight";
  if (std::regex_match(name, match, expert)) {
    const std::string w = match[3] == "gate" ? "w1" : match[3] == "down" ? "w2" : "w3";
    return match[1].str() + "block_sparse_moe.experts." + match[2].str() + "." + w + ".weight";
  }
  return name;
}

}  // namespace ustrain
