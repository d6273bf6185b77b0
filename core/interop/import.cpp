#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "core/checkpoint/fs.h"
#include "core/interop/interop.h"
#include "core/checkpoint/slices.h"
#include "core/checkpoint/writer.h"
#include "core/model/llama.h"
#include "core/recipe/recipe_defaults.h"
#include "core/checkpoint/safetensors_file.h"
#include "core/interop/hf_llama.h"
#include "core/interop/hf_layout.h"
#include "core/interop/hf_tokenizer.h"
#include "data/files/durable_output.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

std::vector<std::int64_t> dims_of(const Shape& s) {
  std::vector<std::int64_t> d;
  for (int i = 0; i < s.rank(); ++i) d.push_back(s[i]);
  return d;
}

// The recipe's [model] against config.json: every key that shapes the computation must agree.
void check_config(const ModelSection& recipe, const HfConfig& hf, const std::string& config_path,
                  const std::string& recipe_source) {
  const ModelSection& config = hf.model;
  const bool qwen = hf.layout == HfLayout::qwen2_moe;
  std::vector<std::string> diffs;
  const auto compare = [&](const char* key, const char* hf_key, auto a, auto b) {
    if (a != b) diffs.push_back(fmt::format("model.{} = {} but {} = {}", key, a, hf_key, b));
  };
  compare("vocab_size", "vocab_size", recipe.vocab_size, config.vocab_size);
  compare("d_model", "hidden_size", recipe.d_model, config.d_model);
  compare("n_layers", "num_hidden_layers", recipe.n_layers, config.n_layers);
  compare("n_heads", "num_attention_heads", recipe.n_heads, config.n_heads);
  compare("n_kv_heads", "num_key_value_heads", recipe.n_kv_heads, config.n_kv_heads);
  // The dense MLP's width: a Mixtral has none (its experts' width below), nor has a model
  // whose layers are all MoE.
  const std::vector<std::int64_t> moe = moe_layers(recipe), config_moe = moe_layers(config);
  if (recipe.n_experts == 0 || config.n_experts == 0 ||
      (qwen && static_cast<std::int64_t>(config_moe.size()) < config.n_layers))
    compare("ffn_hidden", "intermediate_size", recipe.ffn_hidden, config.ffn_hidden);
  compare("tied_embeddings", "tie_word_embeddings", recipe.tied_embeddings, config.tied_embeddings);
  compare("rope_theta", "rope_theta", recipe.rope_theta, config.rope_theta);
  compare("rope_scaling", "rope_scaling.rope_type", recipe.rope_scaling, config.rope_scaling);
  if (recipe.rope_scaling != "none" && recipe.rope_scaling == config.rope_scaling) {
    compare("rope_scaling_factor", "rope_scaling.factor", recipe.rope_scaling_factor, config.rope_scaling_factor);
    compare("rope_low_freq_factor", "rope_scaling.low_freq_factor", recipe.rope_low_freq_factor,
            config.rope_low_freq_factor);
    compare("rope_high_freq_factor", "rope_scaling.high_freq_factor", recipe.rope_high_freq_factor,
            config.rope_high_freq_factor);
    compare("rope_original_max_seq_len", "rope_scaling.original_max_position_embeddings",
            recipe.rope_original_max_seq_len, config.rope_original_max_seq_len);
  }
  compare("norm_eps", "rms_norm_eps", recipe.norm_eps, config.norm_eps);
  compare("sliding_window", "sliding_window", recipe.sliding_window, config.sliding_window);
  compare("n_experts", qwen ? "num_experts" : "num_local_experts", recipe.n_experts, config.n_experts);
  if (recipe.n_experts > 0 && config.n_experts > 0) {
    compare("experts_per_token", "num_experts_per_tok", recipe.experts_per_token, config.experts_per_token);
    const auto width = [](const ModelSection& m) { return m.expert_ffn_hidden > 0 ? m.expert_ffn_hidden : m.ffn_hidden; };
    compare("expert_ffn_hidden", qwen ? "moe_intermediate_size" : "intermediate_size", width(recipe), width(config));
    if (qwen) {
      const auto shared = [&](const ModelSection& m) {
        return m.n_shared_experts * (m.shared_expert_ffn_hidden > 0 ? m.shared_expert_ffn_hidden : width(m));
      };
      compare("n_shared_experts x shared_expert_ffn_hidden", "shared_expert_intermediate_size", shared(recipe),
              shared(config));
      compare("router_renormalize", "norm_topk_prob", recipe.router_renormalize, config.router_renormalize);
      if (moe != config_moe)
        diffs.push_back(fmt::format("model.first_dense_layers and model.moe_layer_interval make layers [{}] MoE but "
                                    "decoder_sparse_step and mlp_only_layers make layers [{}] MoE",
                                    fmt::join(moe, ", "), fmt::join(config_moe, ", ")));
    }
    if (const std::optional<std::string> problem = hf_layout_problem(recipe, hf.layout))
      diffs.push_back(fmt::format("the recipe's mixture of experts is not {}'s: {}",
                                  qwen ? "Qwen2-MoE" : "Mixtral", *problem));
  }
  if (!diffs.empty())
    throw UserError(fmt::format("the recipe {} does not describe the model in {}: {}; set the recipe's [model] "
                                "section to match (`ustrain ckpt inspect` prints it)",
                                recipe_source, config_path, fmt::join(diffs, "; ")));
}

// Where each tensor of the source lives.
struct SourceTensors {
  std::vector<std::unique_ptr<SafetensorsReader>> files;
  std::map<std::string, std::pair<const SafetensorsReader*, const SafetensorsEntry*>> by_name;
};

SourceTensors open_sources(const HfModelFiles& hf) {
  SourceTensors s;
  for (const std::string& f : hf.files) {
    s.files.push_back(std::make_unique<SafetensorsReader>(f));
    for (const SafetensorsEntry& e : s.files.back()->header().entries) {
      const auto listed = hf.weight_map.find(e.name);
      if (!hf.weight_map.empty() && (listed == hf.weight_map.end() || listed->second != f)) continue;
      s.by_name[e.name] = {s.files.back().get(), &e};
    }
  }
  return s;
}

// What the source is: its layout and whether its attention has (zero) biases.
struct SourceLayout {
  HfLayout layout = HfLayout::llama;
  bool qkv_bias = false;
};

// The options with what config.json settles: the vocabulary size when the recipe leaves it
// unset, the check that the recipe describes the model, and the layout; one process writes
// the checkpoint. Without config.json the tensor names tell an MoE model's layout.
ImportOptions with_model_config(const ImportOptions& given, const HfModelFiles& hf, const SourceTensors& source,
                                SourceLayout& layout) {
  ImportOptions o = given;
  if (hf.config) {
    const HfConfig config = read_hf_config(read_text_file(*hf.config), *hf.config);
    if (o.recipe.model.vocab_size == 0) o.recipe.model.vocab_size = config.model.vocab_size;  // unset: the model's
    check_config(o.recipe.model, config, *hf.config, o.recipe.source);
    layout = {config.layout, config.qkv_bias};
  } else if (o.recipe.model.n_experts > 0) {
    const auto named = [&](const std::string& part) {
      for (const auto& [name, where] : source.by_name)
        if (name.find(part) != std::string::npos) return true;
      return false;
    };
    layout = named(".block_sparse_moe.") ? SourceLayout{HfLayout::mixtral, false}
                                         : SourceLayout{HfLayout::qwen2_moe, named("_proj.bias")};
  }
  if (o.recipe.model.vocab_size == 0)
    throw UserError(fmt::format("{} has no config.json to take the vocabulary size from, and the recipe {} leaves "
                                "model.vocab_size unset; set it",
                                o.source, o.recipe.source));
  if (o.recipe.parallel.dp == 0) o.recipe.parallel.dp = 1;  // the one process that writes the checkpoint
  return o;
}

// Every tensor of the source is one of the model's (or one that may be left out).
void check_no_foreign_tensors(const SourceTensors& source, const std::vector<HfTensor>& tensors, const Recipe& recipe) {
  std::set<std::string> expected;
  for (const HfTensor& t : tensors) expected.insert(t.name);
  for (const auto& [name, where] : source.by_name) {
    if (expected.count(name) > 0) continue;
    if (name.ends_with(".rotary_emb.inv_freq")) continue;  // a derived buffer some exports include
    if (name == "lm_head.weight" && recipe.model.tied_embeddings) continue;  // checked below
    throw UserError(fmt::format("{}: tensor {} is not part of a model shaped like the recipe's [model] ({}); "
                                "check the recipe's model section",
                                where.first->path(), name, recipe.source));
  }
}

// The checkpoint's entries, one per parameter of the model, the source tensor of each and
// the factor that turns its values into ustrain's.
struct ImportPlan {
  std::vector<SafetensorsEntry> entries;
  std::vector<std::pair<const SafetensorsReader*, const SafetensorsEntry*>> sources;
  std::vector<float> scales;
};

// Why a tensor ustrain lacks must be zero for the model to be ustrain's.
std::string why_zero(const std::string& name) {
  if (name.ends_with("_proj.bias")) return "ustrain's attention has no biases";
  return "ustrain's shared experts are ungated (Qwen2-MoE's gate must be all zeros, sigmoid(0) = 1/2, as ustrain "
         "exports it)";
}

ImportPlan plan_import(const SourceTensors& source, const std::vector<HfTensor>& tensors, HfLayout layout,
                       const std::string& origin) {
  ImportPlan plan;
  std::vector<float> values;
  for (const HfTensor& t : tensors) {
    const auto it = source.by_name.find(t.name);
    if (it == source.by_name.end())
      throw UserError(fmt::format("{} has no tensor {}; it is not a {} model shaped like the recipe's [model]", origin,
                                  t.name, hf_layout_title(layout)));
    const auto [file, entry] = it->second;
    if (entry->shape != t.shape)
      throw UserError(fmt::format("{}: tensor {} has shape ({}), the recipe's model needs ({})", file->path(), t.name,
                                  fmt::join(entry->shape, ", "), fmt::join(t.shape, ", ")));
    if (t.param.empty()) {  // a tensor ustrain lacks: only zeros compute what ustrain's model does
      values.resize(static_cast<std::size_t>(entry->numel()));
      file->read_f32(*entry, values.data());
      for (std::size_t k = 0; k < values.size(); ++k)
        if (values[k] != 0.0f)
          throw UserError(fmt::format("{}: tensor {} holds {} at element {}, and {}; this model cannot be imported",
                                      file->path(), t.name, values[k], k, why_zero(t.name)));
      continue;
    }
    plan.sources.push_back(it->second);
    plan.scales.push_back(1.0f / t.scale);
    plan.entries.push_back({format_shard_key({std::string(kStateParam), t.param, Slice::whole(entry->shape)}), "F32",
                            entry->shape, 0, 0});
  }
  lay_out_entries(plan.entries);
  return plan;
}

// A tied model stores the embedding once; a separate lm_head must then be the same matrix.
void check_tied_head(const SourceTensors& source, const Recipe& recipe) {
  const auto head = source.by_name.find("lm_head.weight");
  if (!recipe.model.tied_embeddings || head == source.by_name.end()) return;
  std::vector<float> buffer, other;
  const auto& embed = source.by_name.at("model.embed_tokens.weight");
  buffer.resize(static_cast<std::size_t>(embed.second->numel()));
  other.resize(static_cast<std::size_t>(head->second.second->numel()));
  embed.first->read_f32(*embed.second, buffer.data());
  if (other.size() == buffer.size()) head->second.first->read_f32(*head->second.second, other.data());
  if (other != buffer)
    throw UserError(fmt::format("{}: lm_head.weight differs from model.embed_tokens.weight, but the recipe ties "
                                "them; set model.tied_embeddings = false",
                                head->second.first->path()));
}

}  // namespace

InteropReport import_hf_model(const ImportOptions& given) {
  const HfModelFiles hf = locate_hf_model(given.source);
  const SourceTensors source = open_sources(hf);
  SourceLayout layout;
  const ImportOptions o = with_model_config(given, hf, source, layout);
  std::string tokenizer_origin;
  const TokenizerSnapshot tokenizer = import_tokenizer(o.tokenizer, hf, o.recipe, tokenizer_origin);

  const LlamaModel model(o.recipe.model, 1, 1, Recompute::none);  // for its parameter list only
  const std::vector<ParamSpec>& specs = model.params().specs();
  ParamShapes params;
  for (const ParamSpec& s : specs) params.emplace_back(s.name, dims_of(s.shape));
  const std::vector<HfTensor> tensors = hf_tensors(params, o.recipe.model, layout.layout, layout.qkv_bias);
  check_no_foreign_tensors(source, tensors, o.recipe);
  const ImportPlan plan = plan_import(source, tensors, layout.layout, o.source);
  const std::vector<SafetensorsEntry>& entries = plan.entries;
  const auto& sources = plan.sources;
  check_tied_head(source, o.recipe);

  StagedDirectory out(o.output_dir);
  SaveFaults no_faults;
  std::vector<float> buffer;
  CheckpointFile file = write_rank_file(
      out.path(), 0, /*step=*/0, entries,
      [&](std::size_t i) -> const void* {
        buffer.resize(static_cast<std::size_t>(sources[i].second->numel()));
        sources[i].first->read_f32(*sources[i].second, buffer.data());
        // NaN or inf weights import fine and then generate NUL bytes: refuse them here.
        for (std::size_t k = 0; k < buffer.size(); ++k)
          if (!std::isfinite(buffer[k]))
            throw UserError(fmt::format("{}: tensor {} holds a non-finite value ({} at element {}); these weights are "
                                        "unusable",
                                        sources[i].first->path(), sources[i].second->name, buffer[k], k));
        if (plan.scales[i] != 1.0f)
          for (float& v : buffer) v *= plan.scales[i];  // a power of two: exact
        return buffer.data();
      },
      no_faults);
  CheckpointManifest m;
  m.ustrain_version = o.ustrain_version;
  m.weights_only = true;
  m.loss = std::nan("");
  m.backend = "imported from " + o.source;
  for (const ParamSpec& s : specs) m.tensors.push_back({s.name, dims_of(s.shape), {std::string(kStateParam)}});
  m.files = {file};
  Recipe recipe = o.recipe;
  recipe.data.tokenizer = tokenizer.identity.kind;  // what the model's ids are
  m.recipe = to_toml(recipe);
  m.recipe_hash = recipe_hash(m.recipe);
  m.tokenizer = write_checkpoint_tokenizer(out.path(), tokenizer);
  write_manifest(out.path(), m);
  out.commit();
  InteropReport report;
  report.output_dir = o.output_dir;
  report.tensors = static_cast<std::int64_t>(specs.size());
  report.bytes = entries.empty() ? 0 : entries.back().end;
  report.files = 1;
  report.tokenizer = fmt::format("{} from {}", tokenizer.identity.describe(), tokenizer_origin);
  return report;
}

}  // namespace ustrain
