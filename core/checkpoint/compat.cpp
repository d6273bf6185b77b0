#include "core/checkpoint/compat.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <map>

#include "core/recipe/recipe.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::string_view kShapeKeys[] = {"model.vocab_size", "model.d_model",    "model.n_layers",
                                           "model.n_heads",    "model.n_kv_heads", "model.ffn_hidden",
                                           "model.tied_embeddings", "model.n_experts",
                                           "model.expert_ffn_hidden", "model.n_shared_experts",
                                           "model.shared_expert_ffn_hidden", "model.moe_layer_interval",
                                           "model.first_dense_layers"};
constexpr std::string_view kHarmlessKeys[] = {
    "train.steps", "train.eval_interval", "train.eval_batches", "train.max_bad_steps", "train.replica_check_interval",
    "train.replica_check_grads", "train.recompute", "run.name",
    "train.loss_scale_init",  // a resumed run continues at its checkpoint's loss scale
    "run.output_dir", "model.max_seq_len", "model.init_std", "data.prefetch", "data.verify", "parallel.overlap_comm",
    "parallel.layout",  // the keys it chose are compared as what they are
    "parallel.comm_timeout_s", "parallel.startup_timeout_s", "device.memory_check"};
// Logging, tracing (log.trace_steps), checkpoint policy and task evaluation change no number a step computes.
constexpr std::string_view kHarmlessSections[] = {"checkpoint.", "log.", "eval."};
constexpr std::string_view kReassociatingKeys[] = {
    "parallel.dp",           "parallel.tp",   "parallel.sp",      "parallel.pp", "parallel.cp", "parallel.pp_schedule",
    "parallel.virtual_stages", "parallel.zero", "train.micro_batch", "parallel.ep", "parallel.ep_capacity_factor",
    "parallel.dp_shard"};

std::string literal_of(const toml::node& value) {
  if (const auto* s = value.as_string()) return fmt::format("\"{}\"", s->get());
  if (const auto* i = value.as_integer()) return fmt::format("{}", i->get());
  if (const auto* f = value.as_floating_point()) return fmt::format("{}", f->get());
  if (const auto* b = value.as_boolean()) return fmt::format("{}", b->get());
  return "?";
}

// Every "section.key" of a recipe mapped to its value as a TOML literal.
std::map<std::string, std::string> flatten(const std::string& toml_text, const std::string& what) {
  toml::table doc;
  try {
    doc = toml::parse(toml_text, std::string_view(what));
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("{}: the saved recipe does not parse ({}); the checkpoint is damaged", what,
                                e.description()));
  }
  std::map<std::string, std::string> flat;
  for (const auto& [section, node] : doc) {
    const toml::table* table = node.as_table();
    if (table == nullptr) continue;
    for (const auto& [key, value] : *table) flat[fmt::format("{}.{}", section.str(), key.str())] = literal_of(value);
  }
  return flat;
}

}  // namespace

RecipeChangeKind classify_recipe_key(std::string_view key) {
  for (std::string_view k : kShapeKeys)
    if (key == k) return RecipeChangeKind::model_shape;
  for (std::string_view k : kHarmlessKeys)
    if (key == k) return RecipeChangeKind::harmless;
  for (std::string_view prefix : kHarmlessSections)
    if (key.substr(0, prefix.size()) == prefix) return RecipeChangeKind::harmless;
  for (std::string_view k : kReassociatingKeys)
    if (key == k) return RecipeChangeKind::reassociates;
  return RecipeChangeKind::breaks_exactness;
}

std::vector<RecipeChange> recipe_changes(const std::string& saved_toml, const std::string& current_toml) {
  const auto defaults = flatten(to_toml(Recipe{}), "the default recipe");
  const auto saved = flatten(saved_toml, "the checkpoint's recipe");
  const auto current = flatten(current_toml, "the current recipe");
  const auto value_in = [&](const std::map<std::string, std::string>& flat, const std::string& key) {
    const auto it = flat.find(key);
    if (it != flat.end()) return it->second;
    const auto d = defaults.find(key);
    return d != defaults.end() ? d->second : std::string("(absent)");
  };
  std::map<std::string, int> keys;
  for (const auto& [k, v] : saved) keys[k] = 0;
  for (const auto& [k, v] : current) keys[k] = 0;
  std::vector<RecipeChange> changes;
  for (const auto& [key, unused] : keys) {
    const std::string a = value_in(saved, key), b = value_in(current, key);
    if (a != b) changes.push_back({key, a, b, classify_recipe_key(key)});
  }
  return changes;
}

std::string describe(const RecipeChange& c) {
  const char* kind = c.kind == RecipeChangeKind::harmless           ? "harmless"
                     : c.kind == RecipeChangeKind::reassociates
                         ? "the same global batch and state, split differently: losses continue up to float reassociation"
                     : c.kind == RecipeChangeKind::breaks_exactness ? "breaks exact resume"
                                                                    : "changes the model's shape";
  return fmt::format("{} {} -> {} ({})", c.key, c.saved, c.current, kind);
}

void check_resume_changes(const std::vector<RecipeChange>& changes, bool force, const std::string& checkpoint) {
  std::vector<std::string> shape, exactness;
  for (const RecipeChange& c : changes)  // the optimizers' states differ: no force carries one into the other
    if (c.key == "optim.name")
      throw UserError(fmt::format("cannot resume from {}: it was trained with optim.name = {} and the recipe sets "
                                  "optim.name = {}; their optimizer states differ, so resume with optim.name = {} or "
                                  "start a new run from its weights (checkpoint.init_from)",
                                  checkpoint, c.saved, c.current, c.saved));
  for (const RecipeChange& c : changes) {
    if (c.kind == RecipeChangeKind::model_shape) shape.push_back(describe(c));
    if (c.kind == RecipeChangeKind::breaks_exactness) exactness.push_back(describe(c));
  }
  if (!shape.empty())
    throw UserError(fmt::format("cannot resume from {}: the recipe changes the model's shape: {}; use the model "
                                "section the checkpoint was trained with",
                                checkpoint, fmt::join(shape, "; ")));
  if (!exactness.empty() && !force)
    throw UserError(fmt::format("resuming from {} under this recipe would not continue the run exactly: {}; restore "
                                "those keys, or pass --force-resume to continue anyway",
                                checkpoint, fmt::join(exactness, "; ")));
}

}  // namespace ustrain
