#include "core/interop/hf_llama.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/checkpoint/fs.h"
#include "core/interop/hf_config_values.h"
#include "core/interop/hf_qwen2_moe.h"
#include "core/recipe/geometry.h"
#include "data/files/json_input.h"
#include "kernels/error.h"

namespace ustrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr std::int64_t kMaxLayers = 65536;  // model.n_layers's bound

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

HfModelFiles from_index(const fs::path& index) {
  nlohmann::json j;
  try {
    j = parse_json(read_text_file(index.string()), index.string());
  } catch (const nlohmann::json::exception&) {
    throw UserError(fmt::format("{} is not valid JSON", index.string()));
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw UserError(fmt::format("{} has no weight_map object; it is not a safetensors index", index.string()));
  HfModelFiles m;
  std::set<std::string> files;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) throw UserError(fmt::format("{}: weight_map[\"{}\"] is not a file name", index.string(), tensor));
    const std::string path = (index.parent_path() / file.get<std::string>()).string();
    m.weight_map[tensor] = path;
    files.insert(path);
  }
  for (const std::string& f : files) {
    if (!fs::exists(f))
      throw UserError(fmt::format("{} lists the shard {}, which is missing; download the whole model", index.string(), f));
    m.files.push_back(f);
  }
  return m;
}

template <class T>
T get_or(const nlohmann::json& j, const char* key, T fallback) {
  return j.contains(key) && !j[key].is_null() ? j[key].get<T>() : fallback;
}

// rope_scaling {"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
// "original_max_position_embeddings"} (older configs say "type"); "default" is none.
void read_rope_scaling(const nlohmann::json& scaling, const std::string& path, ModelSection& m) {
  const auto refuse = [&](const std::string& what) {
    throw UserError(fmt::format("{}: rope_scaling {}; ustrain implements the llama3 type (Llama 3.1 and 3.2), so this "
                                "model cannot be imported",
                                path, what));
  };
  if (!scaling.is_object()) refuse("is not an object");
  const std::string type = scaling.contains("rope_type") ? scaling["rope_type"].get<std::string>()
                                                         : get_or<std::string>(scaling, "type", "");
  if (type == "default") return;
  if (type != "llama3") refuse(fmt::format("has type \"{}\"", type));
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    if (!scaling.contains(key) || !scaling[key].is_number()) refuse(fmt::format("of type llama3 lacks the number {}", key));
  m.rope_scaling = "llama3";
  m.rope_scaling_factor = scaling["factor"].get<double>();
  m.rope_low_freq_factor = scaling["low_freq_factor"].get<double>();
  m.rope_high_freq_factor = scaling["high_freq_factor"].get<double>();
  m.rope_original_max_seq_len = config_integer(scaling, "original_max_position_embeddings", path);
  if (!(m.rope_scaling_factor > 0 && m.rope_low_freq_factor > 0 && m.rope_high_freq_factor > m.rope_low_freq_factor &&
        m.rope_original_max_seq_len > 0))
    refuse(fmt::format("has factor {}, low_freq_factor {}, high_freq_factor {}, original_max_position_embeddings {}: "
                       "they must be positive with high_freq_factor above low_freq_factor",
                       m.rope_scaling_factor, m.rope_low_freq_factor, m.rope_high_freq_factor,
                       m.rope_original_max_seq_len));
}

std::string type_title(const nlohmann::json& j) {
  const std::string type = j.is_object() && j.contains("model_type") && j["model_type"].is_string()
                               ? j["model_type"].get<std::string>()
                               : "";
  return type == "mixtral" ? "Mixtral" : type == "qwen2_moe" ? "Qwen2-MoE" : type == "mistral" ? "Mistral" : "Llama";
}

// Mistral's and Mixtral's sliding_window: absent or null, none (0); else a window of 1 token
// or more.
std::int64_t read_sliding_window(const nlohmann::json& j, const std::string& path) {
  if (!j.contains("sliding_window") || j["sliding_window"].is_null()) return 0;
  const nlohmann::json& w = j["sliding_window"];
  const bool positive =
      w.is_number_unsigned() ? w.get<std::uint64_t>() >= 1 : w.is_number_integer() && w.get<std::int64_t>() >= 1;
  if (positive) return config_integer(j, "sliding_window", path, 1);  // refuses what passes 64 bits
  std::string shown = w.dump();
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  throw UserError(fmt::format("{}: sliding_window is {}; it is the window in tokens (an integer, 1 or more), or null "
                              "for attention over every earlier token; fix config.json",
                              path, shown));
}

}  // namespace

std::string llama_config_json(const ModelSection& m, const std::string& torch_dtype, const HfTokenIds& ids) {
  return hf_config_json(m, hf_layout_for_export(m, ""), torch_dtype, ids);
}

std::string hf_config_json(const ModelSection& m, HfLayout layout, const std::string& torch_dtype,
                           const HfTokenIds& ids) {
  if (const std::optional<std::string> problem = hf_layout_problem(m, layout))
    throw UserError(fmt::format("this model cannot be written in the Hugging Face {} layout: {}", hf_layout_name(layout),
                                *problem));
  const char* architecture = layout == HfLayout::llama     ? "LlamaForCausalLM"
                             : layout == HfLayout::mistral ? "MistralForCausalLM"
                             : layout == HfLayout::mixtral ? "MixtralForCausalLM"
                                                           : "Qwen2MoeForCausalLM";
  const bool qwen = layout == HfLayout::qwen2_moe, mistral = layout == HfLayout::mistral;
  // Mistral's and Mixtral's convention: the window in tokens, null for none.
  const nlohmann::json window = m.sliding_window > 0 ? nlohmann::json(m.sliding_window) : nlohmann::json(nullptr);
  nlohmann::ordered_json j;
  j["architectures"] = {architecture};
  j["model_type"] = hf_layout_name(layout);
  j["hidden_size"] = m.d_model;
  // Mixtral's experts are its only MLPs; Qwen2-MoE's dense layers have this width.
  const bool mixtral = layout == HfLayout::mixtral;
  j["intermediate_size"] = mixtral ? (m.expert_ffn_hidden > 0 ? m.expert_ffn_hidden : m.ffn_hidden) : m.ffn_hidden;
  if (mixtral) {
    j["num_local_experts"] = m.n_experts;
    j["num_experts_per_tok"] = m.experts_per_token;
    j["router_aux_loss_coef"] = 0.0;
    j["output_router_logits"] = false;
    j["sliding_window"] = window;
  }
  if (qwen) write_qwen2_moe_config(m, j);
  j["num_hidden_layers"] = m.n_layers;
  j["num_attention_heads"] = m.n_heads;
  j["num_key_value_heads"] = m.n_kv_heads;
  j["head_dim"] = ModelGeometry::of(m).head_dim;
  j["vocab_size"] = m.vocab_size;
  j["max_position_embeddings"] = m.max_seq_len;
  j["rms_norm_eps"] = m.norm_eps;
  j["rope_theta"] = m.rope_theta;
  if (mistral) j["sliding_window"] = window;
  j["rope_scaling"] = nullptr;
  if (m.rope_scaling == "llama3")
    j["rope_scaling"] = {{"factor", m.rope_scaling_factor},
                         {"low_freq_factor", m.rope_low_freq_factor},
                         {"high_freq_factor", m.rope_high_freq_factor},
                         {"original_max_position_embeddings", m.rope_original_max_seq_len},
                         {"rope_type", "llama3"}};
  j["tie_word_embeddings"] = m.tied_embeddings;
  j["hidden_act"] = "silu";
  if (!qwen && !mistral) j["attention_bias"] = false;  // Qwen2-MoE's are qkv_bias above; Mistral has none
  j["attention_dropout"] = 0.0;
  if (!qwen && !mistral) j["mlp_bias"] = false;
  j["initializer_range"] = m.init_std;
  j["torch_dtype"] = torch_dtype;
  j["use_cache"] = true;
  if (ids.bos) j["bos_token_id"] = *ids.bos;
  if (ids.eos) j["eos_token_id"] = *ids.eos;
  if (ids.pad) j["pad_token_id"] = *ids.pad;
  return j.dump(2) + "\n";
}

ModelSection model_from_llama_config(const std::string& json_text, const std::string& path) {
  return read_hf_config(json_text, path).model;
}

HfConfig read_hf_config(const std::string& json_text, const std::string& path) {
  nlohmann::json j;
  try {
    j = parse_json(json_text, path);
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for a number beyond a double
    throw UserError(fmt::format("{} is not valid JSON", path));
  }
  HfConfig config;
  ModelSection& m = config.model;
  try {
    const std::string type = get_or<std::string>(j, "model_type", "");
    if (type != "llama" && type != "mistral" && type != "mixtral" && type != "qwen2_moe")
      throw UserError(fmt::format("{}: model_type is \"{}\"; ustrain imports Llama, Mistral, Mixtral and Qwen2-MoE "
                                  "models (model_type \"llama\", \"mistral\", \"mixtral\" or \"qwen2_moe\")",
                                  path, type));
    config.layout = type == "llama"     ? HfLayout::llama
                    : type == "mistral" ? HfLayout::mistral
                    : type == "mixtral" ? HfLayout::mixtral
                                        : HfLayout::qwen2_moe;
    const auto refuse = [&](const char* what) {
      throw UserError(fmt::format("{}: {}; ustrain's Llama has no such feature, so this model cannot be imported",
                                  path, what));
    };
    if (type == "mixtral") {  // Llama's blocks with a softmax, renormalised top-k router in every layer
      m.n_experts = config_integer(j, "num_local_experts", path, 1);
      m.experts_per_token = config_integer(j, "num_experts_per_tok", path, 1);
    }
    if (type == "mistral" || type == "mixtral") m.sliding_window = read_sliding_window(j, path);
    if (get_or<std::string>(j, "hidden_act", "silu") != "silu") refuse("hidden_act is not silu");
    if (get_or<bool>(j, "attention_bias", false)) refuse("attention_bias is true");
    if (get_or<bool>(j, "mlp_bias", false)) refuse("mlp_bias is true");
    // Newer transformers versions write RoPE as rope_parameters {"rope_type", "rope_theta", ...}.
    const bool rope_parameters = j.contains("rope_parameters") && j["rope_parameters"].is_object();
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) read_rope_scaling(j["rope_scaling"], path, m);
    else if (rope_parameters) read_rope_scaling(j["rope_parameters"], path, m);
    m.d_model = config_integer(j, "hidden_size", path, 1);
    m.ffn_hidden = config_integer(j, "intermediate_size", path, 1);
    m.n_layers = config_integer(j, "num_hidden_layers", path, 1, kMaxLayers);
    m.n_heads = config_integer(j, "num_attention_heads", path, 1);
    m.n_kv_heads = config_integer_or(j, "num_key_value_heads", m.n_heads, path, 1);
    m.vocab_size = config_integer(j, "vocab_size", path, 1);
    m.max_seq_len = config_integer_or(j, "max_position_embeddings", 2048, path, 1);
    m.norm_eps = get_or<double>(j, "rms_norm_eps", 1e-6);
    m.rope_theta = get_or<double>(j, "rope_theta",
                                  rope_parameters ? get_or<double>(j["rope_parameters"], "rope_theta", 10000.0) : 10000.0);
    m.tied_embeddings = get_or<bool>(j, "tie_word_embeddings", false);
    m.init_std = get_or<double>(j, "initializer_range", m.init_std);
    if (m.d_model % m.n_heads != 0) refuse("hidden_size is not a multiple of num_attention_heads");
    if (config_integer_or(j, "head_dim", m.d_model / m.n_heads, path) != m.d_model / m.n_heads)
      refuse("head_dim differs from hidden_size / num_attention_heads");
    if (config.layout == HfLayout::qwen2_moe) config.qkv_bias = read_qwen2_moe_config(j, path, m);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: not a usable {} config ({})", path, type_title(j), e.what()));
  }
  return config;
}

HfTokenIds token_ids_from_llama_config(const std::string& json_text, const std::string& path) {
  nlohmann::json j;
  try {
    j = parse_json(json_text, path);
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for a number beyond a double
    throw UserError(fmt::format("{} is not valid JSON", path));
  }
  const auto id = [&](const char* key) -> std::optional<std::int64_t> {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
    return j[key].get<std::int64_t>();
  };
  return {id("bos_token_id"), id("eos_token_id"), id("pad_token_id")};
}

HfModelFiles locate_hf_model(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  HfModelFiles m;
  fs::path dir;
  if (fs::is_directory(p, ec)) {
    dir = p;
    if (fs::exists(p / kIndexFile)) m = from_index(p / kIndexFile);
    else if (fs::exists(p / kSingleFile)) m.files = {(p / kSingleFile).string()};
    else
      throw UserError(fmt::format("{} holds neither {} nor {}; pass a Hugging Face model directory or file", path,
                                  kSingleFile, kIndexFile));
  } else if (fs::is_regular_file(p, ec) && ends_with(path, ".index.json")) {
    dir = p.parent_path();
    m = from_index(p);
  } else if (fs::is_regular_file(p, ec) && ends_with(path, ".safetensors")) {
    dir = p.parent_path();
    m.files = {path};
  } else {
    throw UserError(fmt::format("{} is not a .safetensors file, a safetensors index or a model directory", path));
  }
  if (dir.empty()) dir = ".";
  if (fs::exists(dir / "config.json")) m.config = (dir / "config.json").string();
  if (fs::is_regular_file(dir / "tokenizer.model")) m.tokenizer_model = (dir / "tokenizer.model").string();
  if (fs::is_regular_file(dir / "tokenizer.json")) m.tokenizer_json = (dir / "tokenizer.json").string();
  return m;
}

bool is_hf_model(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_regular_file(p, ec)) return ends_with(path, ".safetensors") || ends_with(path, ".index.json");
  return fs::exists(p / kSingleFile, ec) || fs::exists(p / kIndexFile, ec);
}

}  // namespace ustrain
