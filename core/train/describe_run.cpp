#include "core/train/describe_run.h"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "core/distributed/pipeline_plan.h"
#include "core/distributed/fail_together.h"
#include "core/distributed/process_layout.h"
#include "core/distributed/rank_agreement.h"
#include "core/distributed/rank_lines.h"
#include "core/step/memory_fit.h"
#include "core/memory/memory_plan.h"
#include "core/recipe/recipe_defaults.h"
#include "core/run/build_info.h"
#include "core/run/cpu_threads.h"
#include "core/step/run_schedule.h"
#include "core/step/model_instance.h"
#include "core/plan/rank_memory.h"
#include "core/train/auto_layout.h"
#include "core/train/training_data.h"
#include "core/step/training_step.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/error.h"
#include "parallel/launch.h"
#include "parallel/pipeline_timeline.h"

namespace ustrain {
namespace {

// Pipeline rank `r`'s chunks, with the activation slots they plan and the schedule's peak.
std::string describe_chunks(const ModelGeometry& g, const PipelinePlan& pipeline, int r) {
  std::vector<std::string> chunks;
  for (std::size_t c = 0; c < g.chunks.size(); ++c) {
    const ChunkSpan& span = g.chunks[c];
    const std::string layers = span.end_layer - span.first_layer == 1
                                   ? fmt::format("layer {}", span.first_layer)
                                   : fmt::format("layers {}-{}", span.first_layer, span.end_layer - 1);
    chunks.push_back(fmt::format("stage {}: {}{}{}, {} activation slot(s)", span.stage, layers,
                                 span.embedding ? " + embedding" : "",
                                 span.head ? " + final norm, head and loss" : "", pipeline.slots.slots[c]));
  }
  return fmt::format("\npipeline rank {}: {}; peak in-flight micro-batch activations {} (one per micro-batch and "
                     "chunk)\n",
                     r, fmt::join(chunks, "; "), pipeline.train_simulation.peak_slots[static_cast<std::size_t>(r)]);
}

// Which layers are mixtures of experts, of what, and the parameters a token uses.
std::string describe_experts(const ModelGeometry& g, std::int64_t total) {
  std::vector<int> layers;
  for (int l = 0; l < g.n_layers; ++l)
    if (g.moe_layer(l)) layers.push_back(l);
  return fmt::format("mixture of experts: layer{} {} ({} of {}) route each token to {} of {} experts of width {}{}; "
                     "a token's matrix multiplies use {} of the model's {} parameters (FLOPs and MFU count these)\n",
                     layers.size() == 1 ? "" : "s", fmt::join(layers, ", "), layers.size(), g.n_layers, g.top_k,
                     g.n_experts, g.expert_ffn,
                     g.shared_ffn > 0 ? fmt::format(", beside shared experts of width {} in all", g.shared_ffn) : "",
                     g.matmul_params(), total);
}

// How context parallelism splits the sequences and what its ring sends.
std::string describe_context_parallelism(const Recipe& recipe, const ModelGeometry& g) {
  const std::int64_t cp = recipe.parallel.cp, chunk = g.seq / 2;
  const auto runs = g.positions();
  // One key/value block: 2 Hkv Dh values per token of a micro-batch, in the activations' dtype;
  // the gradient sums that travel with them backward are fp32.
  const std::int64_t tokens = recipe.train.micro_batch * g.seq, kv = 2 * g.kv_heads * g.head_dim;
  const auto block = static_cast<std::size_t>(tokens * kv) * dtype_size(compute_dtype(recipe));
  const auto sums = static_cast<std::size_t>(tokens * kv) * sizeof(float);
  return fmt::format(
      "context parallelism: {} ranks; each holds {} of the {} tokens of every sequence, as two chunks of {} (rank 0: "
      "positions [{}, {}) and [{}, {})), so activations are planned for {}-token sequences; ring attention sends, "
      "per layer and micro-batch, {} forward ({} key/value blocks of {}) and {} backward (as many blocks and {} fp32 "
      "gradient sums of {})\n",
      cp, g.seq, recipe.train.seq_len, chunk, runs[0].begin, runs[0].begin + chunk, runs[1].begin,
      runs[1].begin + chunk, g.seq, format_bytes((cp - 1) * block), cp - 1, format_bytes(block),
      format_bytes((cp - 1) * block + cp * sums), cp, format_bytes(sums));
}

// The memory plan of pipeline rank `r` (tensor- and data-parallel rank 0), after its chunks
// when there are several pipeline ranks.
std::string describe_rank_plan(const Recipe& recipe, int r) {
  const RankMemory memory = plan_rank_memory(recipe, r);
  std::string s;
  if (recipe.parallel.pp > 1) s += describe_chunks(memory.geometry, memory.pipeline, r);
  if (recipe.parallel.dp * recipe.parallel.tp * recipe.parallel.pp * recipe.parallel.cp > 1)
    s += fmt::format("the memory plan below is one rank's (pipeline rank {}, data-, context- and tensor-parallel rank "
                     "0)\n",
                     r);
  std::size_t ring = 0, muon = 0;
  for (const PlanEntry& e : memory.plan.entries()) {
    if (e.name.starts_with("ring.")) ring += e.bytes;
    if (e.name.find("muon.") != std::string::npos) muon += e.bytes;
  }
  if (ring > 0) s += fmt::format("ring attention's buffers: {} of the workspace\n", format_bytes(ring));
  if (muon > 0)
    s += fmt::format("Muon's gathered matrices and Newton-Schulz workspace (muon.*): {}\n", format_bytes(muon));
  return s + memory.plan.summary();
}

// The checks `ustrain train` makes before its first step, in its order, that need no other
// rank, no GPU and no run directory: the host's memory for this host's ranks (`ustrain train`
// saves at least its last step), device.threads, and the data as data-parallel reader 0 opens
// it (every shard mapped, data.verify's checksums). Returns the warnings training would log.
std::vector<std::string> check_as_training_does(const Recipe& recipe, const ProcessInfo& launch) {
  std::vector<std::string> warnings;
  check_host_fits(recipe, host_available_bytes(), launch.local_world_size, /*saves_checkpoints=*/true);
  if (recipe.device.type == "cpu") {
    const ThreadCheck threads = check_threads(recipe.device.threads, usable_cores());
    if (!threads.error.empty()) throw UserError(threads.error);
    if (!threads.warning.empty()) warnings.push_back(threads.warning);
  }
  const TrainingData data(recipe, 0, static_cast<int>(recipe.parallel.dp));
  return warnings;
}

// Expert parallelism (parallel/expert_dispatch.h): which experts each ep rank holds, the
// dispatch's capacity and planned buffers, and the all-to-all bytes a rank of pipeline rank 0
// sends per step under uniform routing (R = Q = (E-1)/E N k rows each way: forward (R + Q) D,
// backward (2R + Q) D per MoE layer and micro-batch). Under tp each tp rank sends 1/tp of them,
// and the owners' tp groups all-gather the received rows (forward once, backward twice: rows
// and gradients) and reduce-scatter the results (once each way), (tp-1)/tp Q D bytes per rank
// each: 5 (tp-1)/tp Q D per layer on the tp group.
std::string describe_expert_parallelism(const Recipe& recipe, const ModelGeometry& g, DType compute) {
  const std::int64_t ep = g.ep, tp = g.tp, n = g.tokens(recipe.train.micro_batch), k = g.top_k, d = g.d_model;
  const std::int64_t f = g.expert_ffn_local, cap = g.dispatch_capacity(recipe.train.micro_batch);
  const std::int64_t gathered = ExpertDispatcher::gathered_rows(cap, g.ep, g.tp);
  const auto bytes = static_cast<std::int64_t>(dtype_size(compute));
  std::vector<std::string> blocks;
  for (std::int64_t r = 0; r < ep; ++r)
    blocks.push_back(fmt::format("rank {}: experts {}-{}", r, r * g.experts_local, (r + 1) * g.experts_local - 1));
  int moe_layers = 0;
  for (const ChunkSpan& c : g.chunks)
    for (int l = c.first_layer; l < c.end_layer; ++l) moe_layers += g.moe_layer(l) ? 1 : 0;
  const std::int64_t buffers = (n * k * d + 3 * cap * d + gathered * d + 6 * cap * f) * bytes;
  const double rows_each_way = static_cast<double>(ep - 1) / static_cast<double>(ep) * static_cast<double>(n * k);
  const double per_layer = 5.0 * rows_each_way * static_cast<double>(d * bytes) / static_cast<double>(tp);
  const double steps = moe_layers * static_cast<double>(recipe.grad_accum_steps());
  const double per_step = per_layer * steps;
  std::string tp_share;
  if (tp > 1) {
    const double tp_per_layer = 5.0 * static_cast<double>(tp - 1) / static_cast<double>(tp) * rows_each_way *
                                static_cast<double>(d * bytes);
    tp_share = fmt::format(
        "; under tp = {} each tp rank sends 1/{} of its position's rows (the owners' tp groups all-gather them and "
        "reduce-scatter the results: {} per rank and step more on the tp group, in a gathered buffer of {} x {})",
        tp, tp, format_bytes(static_cast<std::size_t>(tp_per_layer * steps)), gathered, d);
  }
  return fmt::format(
      "expert parallelism: {} ranks borrowed from dp x cp, each holding {} of the {} experts of every MoE layer ({}); "
      "dispatch capacity {} rows per round ({} x the {} rows a rank routes per micro-batch), more take extra rounds; "
      "dispatch buffers and a round's expert scratch {} per rank (send {} x {}, receive, gradients and results "
      "{} x {} each, expert activations {} x {}); all-to-all sent per rank and step under uniform routing: {} "
      "({} MoE layer(s) on pipeline rank 0 x {} micro-batch(es) x {} per layer, forward 2/5, backward 3/5){}\n",
      ep, g.experts_local, g.n_experts, fmt::join(blocks, ", "), cap, recipe.parallel.ep_capacity_factor, n * k,
      format_bytes(static_cast<std::size_t>(buffers)), n * k, d, cap, d, cap, 6 * f,
      format_bytes(static_cast<std::size_t>(per_step)), moe_layers, recipe.grad_accum_steps(),
      format_bytes(static_cast<std::size_t>(per_layer)), tp_share);
}

// Without a launcher, a layout of several ranks: how many, and the lines that start them.
std::string describe_launch(const Recipe& recipe, const TrainCommand& command) {
  const ParallelSection& p = recipe.parallel;
  const std::int64_t ranks = p.dp * p.tp * p.pp * p.cp;
  return fmt::format("\nthis layout needs {} processes (dp x tp x pp x cp = {} x {} x {} x {}; the plan above is for "
                     "them on this host); `ustrain train` started alone refuses it. Start it with one of:\n{}",
                     ranks, p.dp, p.tp, p.pp, p.cp, launch_lines(command, ranks));
}

// What `given`, resolved to `recipe` for `launch`, trains, after the checks training makes first.
std::string describe_plan(const Recipe& given, const Recipe& recipe, const DatasetFacts& data,
                          const ProcessInfo& launch, const ProcessInfo& started, const TrainCommand& command) {
  const std::vector<std::string> warnings = check_as_training_does(recipe, launch);
  const ModelGeometry geometry = geometry_of(recipe, 0, 0);
  const LlamaModel model(recipe.model, geometry, 1, Recompute::none);  // for its sizes
  std::string s = "# resolved recipe\n" + to_toml(recipe) + "\n";
  for (const std::string& filled : filled_defaults(given, recipe)) s += "# " + filled + "\n";
  if (const std::optional<std::string> note = shortened_warmup_note(recipe)) s += "# warning: " + *note + "\n";
  for (const std::string& warning : warnings) s += "# warning: " + warning + "\n";
  s += fmt::format("# data: {} dataset{} tokenized with {}: {} training and {} validation tokens\n", data.datasets,
                   data.datasets == 1 ? "" : "s", data.tokenizer.describe(), data.train_tokens, data.validation_tokens);
  s += fmt::format("parameters: {} ({:.2f} M); in matrix multiplies: {}\n", model.params().count(),
                   static_cast<double>(model.params().count()) / 1e6, model.matmul_params());
  s += fmt::format("model FLOPs per token: {:.3g} (6 N + 6 L d S at S = {})\n",
                   model.flops_per_token(recipe.train.seq_len), recipe.train.seq_len);
  s += fmt::format("tokens per step: {} ({} data-parallel ranks x {} micro-batches of {} x {})\n",
                   recipe.train.global_batch * recipe.train.seq_len, recipe.parallel.dp,
                   recipe.grad_accum_steps(), recipe.train.micro_batch, recipe.train.seq_len);
  if (recipe.parallel.tp > 1)
    s += fmt::format("tensor parallelism: {} ranks{}; each holds {} of {} heads, {} of {} kv heads, {} of {} MLP "
                     "units and {} vocabulary rows (the vocabulary padded to {})\n",
                     recipe.parallel.tp, geometry.sequence_parallel() ? " with sequence parallelism" : "",
                     geometry.heads, geometry.n_heads, geometry.kv_heads, geometry.n_kv_heads, geometry.ffn_local,
                     geometry.ffn, geometry.vocab_local, geometry.vocab_padded);
  if (recipe.model.n_experts > 0) s += describe_experts(geometry, model.params().count());
  if (recipe.parallel.ep > 1) s += describe_expert_parallelism(recipe, geometry, compute_dtype(recipe));
  if (recipe.parallel.cp > 1) s += describe_context_parallelism(recipe, geometry);
  if (recipe.parallel.dp > 1 && recipe.parallel.shard_dp() < recipe.parallel.dp)
    s += fmt::format("ZeRO stage {} over blocks of {} of the {} data-parallel ranks (hybrid sharding: the {} blocks "
                     "replicate each other)\n",
                     recipe.parallel.zero, recipe.parallel.shard_dp(), recipe.parallel.dp,
                     recipe.parallel.dp / recipe.parallel.shard_dp());
  else if (recipe.parallel.dp > 1)
    s += fmt::format("ZeRO stage {} over {} data-parallel ranks\n", recipe.parallel.zero, recipe.parallel.dp);
  // One memory plan per pipeline rank (tensor- and data-parallel rank 0 of each).
  const auto pp = static_cast<int>(recipe.parallel.pp);
  const PipelinePlan first = plan_pipeline(recipe, 0);
  if (pp > 1)
    s += fmt::format("pipeline parallelism: {} ranks x {} chunk(s), {} schedule, {} micro-batches per step: bubble "
                     "{:.3f} of the compute time (simulated with equal costs per action)\n",
                     pp, recipe.parallel.virtual_stages, recipe.parallel.pp_schedule,
                     first.train.shape.micro_batches, first.train_simulation.bubble);
  for (int r = 0; r < pp; ++r) s += describe_rank_plan(recipe, r);
  if (pp > 1) {
    s += '\n';
    s += draw_pipeline_timeline(first.train);
  }
  if (started.launcher == "none" && launch.world_size > 1) s += describe_launch(recipe, command);
  return s;
}

}  // namespace

std::string describe_run(const Recipe& as_given, const TrainCommand& command) {
  DatasetFacts data;
  const ProcessInfo started = discover_process();
  // Under parallel.layout = "auto", the layout for the launch's processes (without a launcher,
  // those the keys set by hand need).
  LaidOut laid = lay_out(as_given, started, dry_run_launch(as_given, started).world_size,
                         keys_set_by_hand(command.recipe_path, command.overrides), override_keys(command.overrides));
  const Recipe& given = laid.recipe;
  const std::string chosen = laid.chosen ? "# " + auto_layout_line(*laid.chosen) + "\n" : "";
  const ProcessInfo launch = dry_run_launch(given, started);
  const Recipe recipe = with_launch_defaults(with_dataset_defaults(given, &data), launch);
  if (launch.launcher == "none") return chosen + describe_plan(given, recipe, data, launch, started, command);
  // Under a launcher the ranks check first that they agree, --dry-run included: one dry rank
  // beside training ones would otherwise leave them waiting for it. Then they fail together,
  // and print the plan once: what only one rank sees (its host's cores) it prints itself.
  ProcessLayout agreed(recipe, start_facts(recipe, build_version(), "", "ustrain train --dry-run"),
                       std::move(laid.world));
  Communicator& world = agreed.groups().world().host();
  std::string text;
  fail_together(world, [&] { text = chosen + describe_plan(given, recipe, data, launch, started, command); });
  return lines_to_print(world, text);
}

}  // namespace ustrain
