#include "core/interop/hf_layout.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/interop/hf_mixtral.h"
#include "core/interop/hf_qwen2_moe.h"
#include "kernels/error.h"

namespace ustrain {

const char* hf_layout_name(HfLayout layout) {
  switch (layout) {
    case HfLayout::llama: return "llama";
    case HfLayout::mixtral: return "mixtral";
    case HfLayout::qwen2_moe: return "qwen2_moe";
  }
  return "?";
}

namespace {

const char* title(HfLayout layout) {
  return layout == HfLayout::llama ? "Llama" : layout == HfLayout::mixtral ? "Mixtral" : "Qwen2-MoE";
}

}  // namespace

std::optional<std::string> hf_layout_problem(const ModelSection& m, HfLayout layout) {
  const bool moe = m.n_experts > 0;
  if (layout == HfLayout::llama)
    return moe ? std::optional<std::string>("it is a mixture of experts, which a Llama lacks") : std::nullopt;
  if (!moe) return "it has no experts: a dense model is written as a Llama (--layout llama)";
  return layout == HfLayout::mixtral ? mixtral_problem(m) : qwen2_moe_problem(m);
}

HfLayout hf_layout_for_export(const ModelSection& m, const std::string& requested) {
  HfLayout layout = m.n_experts > 0 ? HfLayout::mixtral : HfLayout::llama;
  if (requested == "qwen2_moe") layout = HfLayout::qwen2_moe;
  else if (requested == "mixtral") layout = HfLayout::mixtral;
  else if (requested == "llama") layout = HfLayout::llama;
  else if (!requested.empty())
    throw UserError(fmt::format("--layout {} is not a Hugging Face layout ustrain writes; use llama, mixtral or "
                                "qwen2_moe",
                                requested));
  std::optional<std::string> problem = hf_layout_problem(m, layout);
  // The bias is part of a trained model: without it other experts are chosen. (An import into
  // a recipe with balancing is fine: the bias starts at zero.)
  if (!problem && m.n_experts > 0 && m.router_bias_update_rate > 0)
    problem = fmt::format("its routers choose experts with a per-expert bias (model.router_bias_update_rate, "
                          "auxiliary-loss-free balancing) that {}'s router lacks",
                          title(layout));
  if (!problem) return layout;
  std::string hint;
  if (layout == HfLayout::mixtral && !qwen2_moe_problem(m) && m.router_bias_update_rate == 0)
    hint = "; the Qwen2-MoE layout holds it: pass --layout qwen2_moe";
  throw UserError(fmt::format("this {} model cannot be exported in the Hugging Face {} layout{}: {}{}",
                              m.n_experts > 0 ? "mixture-of-experts" : "dense", title(layout),
                              requested.empty() ? " (the default)" : "", *problem, hint));
}

std::vector<std::int64_t> moe_layers(const ModelSection& m) {
  std::vector<std::int64_t> layers;
  if (m.n_experts == 0) return layers;
  for (std::int64_t l = m.first_dense_layers; l < m.n_layers; l += std::max<std::int64_t>(1, m.moe_layer_interval))
    layers.push_back(l);
  return layers;
}

std::vector<HfTensor> hf_tensors(const ParamShapes& params, const ModelSection& m, HfLayout layout, bool qkv_bias) {
  if (layout == HfLayout::qwen2_moe) return qwen2_moe_tensors(params, m, qkv_bias);
  std::vector<HfTensor> out;
  for (const auto& [name, shape] : params)
    out.push_back({layout == HfLayout::mixtral ? mixtral_tensor_name(name) : name, shape, name, 1.0f});
  return out;
}

}  // namespace ustrain
