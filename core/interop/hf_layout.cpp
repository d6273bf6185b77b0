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
    case HfLayout::mistral: return "mistral";
  }
  return "?";
}

const char* hf_layout_title(HfLayout layout) {
  switch (layout) {
    case HfLayout::llama: return "Llama";
    case HfLayout::mixtral: return "Mixtral";
    case HfLayout::qwen2_moe: return "Qwen2-MoE";
    case HfLayout::mistral: return "Mistral";
  }
  return "?";
}

namespace {

// Why a dense layout cannot hold `m`, or nothing.
std::optional<std::string> dense_problem(const ModelSection& m, HfLayout layout) {
  if (m.n_experts > 0)
    return fmt::format("it is a mixture of experts, which a {} lacks", hf_layout_title(layout));
  if (layout == HfLayout::llama && m.sliding_window > 0)
    return fmt::format("it attends within a sliding window (model.sliding_window = {}), which a Llama lacks; a "
                       "Mistral holds it (--layout mistral, the default for it)",
                       m.sliding_window);
  if (layout == HfLayout::mistral && m.rope_scaling != "none")
    return "it scales RoPE (model.rope_scaling), which a Mistral config does not carry";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> hf_layout_problem(const ModelSection& m, HfLayout layout) {
  if (layout == HfLayout::llama || layout == HfLayout::mistral) return dense_problem(m, layout);
  if (m.n_experts == 0)
    return "it has no experts: a dense model is written as a Llama (--layout llama), or with a sliding window as a "
           "Mistral (--layout mistral)";
  if (layout == HfLayout::qwen2_moe && m.sliding_window > 0)
    return fmt::format("it attends within a sliding window (model.sliding_window = {}) in every layer, which ustrain "
                       "does not write for Qwen2-MoE (its window covers only some layers); the Mixtral layout holds it",
                       m.sliding_window);
  return layout == HfLayout::mixtral ? mixtral_problem(m) : qwen2_moe_problem(m);
}

HfLayout hf_layout_for_export(const ModelSection& m, const std::string& requested) {
  HfLayout layout = m.n_experts > 0 ? HfLayout::mixtral : m.sliding_window > 0 ? HfLayout::mistral : HfLayout::llama;
  if (requested == "qwen2_moe") layout = HfLayout::qwen2_moe;
  else if (requested == "mixtral") layout = HfLayout::mixtral;
  else if (requested == "llama") layout = HfLayout::llama;
  else if (requested == "mistral") layout = HfLayout::mistral;
  else if (!requested.empty())
    throw UserError(fmt::format("--layout {} is not a Hugging Face layout ustrain writes; use llama, mistral, mixtral "
                                "or qwen2_moe",
                                requested));
  std::optional<std::string> problem = hf_layout_problem(m, layout);
  // The bias is part of a trained model: without it other experts are chosen. (An import into
  // a recipe with balancing is fine: the bias starts at zero.)
  if (!problem && m.n_experts > 0 && m.router_bias_update_rate > 0)
    problem = fmt::format("its routers choose experts with a per-expert bias (model.router_bias_update_rate, "
                          "auxiliary-loss-free balancing) that {}'s router lacks",
                          hf_layout_title(layout));
  if (!problem) return layout;
  std::string hint;
  if (layout == HfLayout::mixtral && !hf_layout_problem(m, HfLayout::qwen2_moe) && m.router_bias_update_rate == 0)
    hint = "; the Qwen2-MoE layout holds it: pass --layout qwen2_moe";
  throw UserError(fmt::format("this {} model cannot be exported in the Hugging Face {} layout{}: {}{}",
                              m.n_experts > 0 ? "mixture-of-experts" : "dense", hf_layout_title(layout),
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
