// Resuming under a changed recipe. Each recipe key falls in one of three kinds:
//   model_shape       the tensors themselves differ (model.vocab_size, d_model, n_layers,
//                     n_heads, n_kv_heads, ffn_hidden, tied_embeddings): always an error;
//   harmless          the continuation computes the same numbers (train.steps,
//                     train.eval_interval, train.eval_batches, train.recompute, run.name,
//                     run.output_dir, model.max_seq_len, model.init_std, data.prefetch,
//                     data.verify, parallel.overlap_comm, parallel.layout,
//                     checkpoint.*, log.*):
//                     allowed and reported. A new train.steps stretches the LR schedule.
//   reassociates      how the same global batch and state are split (parallel.dp, parallel.tp,
//                     parallel.sp, parallel.pp, parallel.pp_schedule, parallel.virtual_stages,
//                     parallel.zero, parallel.ep, parallel.ep_capacity_factor,
//                     train.micro_batch): the state is resharded on load and
//                     the continuation sums the same gradients in another order: allowed and
//                     reported;
//   breaks_exactness  everything else (seed, data, batch and sequence sizes, optimizer
//                     settings, schedule, precision, device, threads, other parallel keys): an
//                     error unless forced.
// Another optimizer (optim.name) is always an error: the checkpoint holds the other's state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ustrain {

enum class RecipeChangeKind { harmless, reassociates, breaks_exactness, model_shape };

struct RecipeChange {
  std::string key;      // "train.steps"
  std::string saved;    // TOML literal in the checkpoint's recipe
  std::string current;  // TOML literal now
  RecipeChangeKind kind;
};

RecipeChangeKind classify_recipe_key(std::string_view key);

// The keys whose values differ between two resolved recipes (TOML text as to_toml writes
// it); a key one of them lacks (written by another ustrain version) counts at its default.
std::vector<RecipeChange> recipe_changes(const std::string& saved_toml, const std::string& current_toml);

// "train.steps 30 -> 60 (harmless)"
std::string describe(const RecipeChange& change);

// The resume rules above: UserError naming the checkpoint and every offending key for a
// model-shape change, or an exactness change without `force`.
void check_resume_changes(const std::vector<RecipeChange>& changes, bool force, const std::string& checkpoint);

}  // namespace ustrain
