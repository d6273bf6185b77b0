#include "core/recipe/recipe_checks.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <string_view>
#include <tuple>

#include "core/recipe/model_size.h"
#include "core/recipe/step_range.h"
#include "data/loading/blend.h"
#include "parallel/pipeline_schedule.h"

namespace ustrain {
namespace {

// What tensor (and sequence) parallelism needs of the model: whole heads, whole GQA groups and
// equal MLP slices on every rank; under sp, token rows that split evenly.
void check_tensor_parallel_rules(const Recipe& r, const Origins& at) {
  const std::int64_t tp = r.parallel.tp;
  if (tp == 1) return;
  const ModelSection& m = r.model;
  std::vector<std::pair<std::string_view, std::int64_t>> divisible = {
      {"model.n_heads", m.n_heads}, {"model.n_kv_heads", m.n_kv_heads}, {"model.ffn_hidden", m.ffn_hidden}};
  if (m.n_experts > 0) {  // the experts split their hidden units as the dense MLP does
    const std::int64_t expert = m.expert_ffn_hidden > 0 ? m.expert_ffn_hidden : m.ffn_hidden;
    divisible.emplace_back(m.expert_ffn_hidden > 0 ? "model.expert_ffn_hidden" : "model.ffn_hidden", expert);
    if (m.n_shared_experts > 0)
      divisible.emplace_back("model.shared_expert_ffn_hidden",
                             m.shared_expert_ffn_hidden > 0 ? m.shared_expert_ffn_hidden : expert);
  }
  for (const auto& [key, value] : divisible)
    if (value % tp != 0)
      fail("{}: {} = {} is not divisible by parallel.tp = {}; tensor parallelism gives every rank the same number "
           "of attention heads, key/value heads and MLP units, so choose a tp that divides {} (or change the model)",
           at.of({key, "parallel.tp"}), key, value, tp, key);
  const std::int64_t cp = r.parallel.cp, local = r.train.seq_len / cp;
  if (r.parallel.sp && cp == 1 && local % tp != 0)
    fail("{}: train.seq_len = {} is not divisible by parallel.tp = {}; sequence parallelism splits every "
         "micro-batch's tokens evenly over the tensor-parallel ranks, so make seq_len a multiple of tp, or set "
         "parallel.sp = false",
         at.of({"train.seq_len", "parallel.tp", "parallel.sp"}), r.train.seq_len, tp);
  if (r.parallel.sp && cp > 1 && local % tp != 0)
    fail("{}: train.seq_len / parallel.cp = {} / {} = {} tokens per context-parallel rank is not divisible by "
         "parallel.tp = {}; sequence parallelism splits each rank's tokens evenly over the tensor-parallel ranks, so "
         "make seq_len a multiple of cp * tp = {}, or set parallel.sp = false",
         at.of({"train.seq_len", "parallel.cp", "parallel.tp", "parallel.sp"}), r.train.seq_len, cp, local, tp,
         cp * tp);
}

// What context parallelism needs: every sequence cut into 2 cp equal chunks, two per rank
// (parallel/ring_attention.h), so seq_len divides by 2 cp.
void check_context_parallel_rules(const Recipe& r, const Origins& at) {
  const std::int64_t cp = r.parallel.cp;
  if (cp == 1 || r.train.seq_len % (2 * cp) == 0) return;
  fail("{}: train.seq_len = {} is not divisible by 2 * parallel.cp = {}; context parallelism cuts every sequence "
       "into 2 cp equal chunks (two per rank, so that every rank does the same share of the causal attention), so "
       "make seq_len a multiple of {} or choose another cp",
       at.of({"train.seq_len", "parallel.cp"}), r.train.seq_len, 2 * cp, 2 * cp);
}

// What expert parallelism needs: its groups are blocks of the dp x cp ranks (parallel/mesh.h),
// so ep divides dp * cp (with dp unset (0) that rule waits for the launch: check_recipe asks
// again), each ep rank holds as many of a layer's experts as the others, and under tp > 1 sp is
// on so that the tp ranks dispatch different rows (parallel/expert_dispatch.h).
void check_expert_parallel_rules(const Recipe& r, const Origins& at) {
  const ParallelSection& p = r.parallel;
  // ep divides dp * cp when what dp leaves of ep divides cp (no product that could overflow).
  if (p.dp != 0 && p.cp % (p.ep / std::gcd(p.ep, p.dp)) != 0) {
    const std::string product =
        p.dp <= std::numeric_limits<std::int64_t>::max() / p.cp ? fmt::format(" = {}", p.dp * p.cp) : "";
    fail("{}: parallel.ep = {} does not divide parallel.dp * parallel.cp = {} * {}{}; expert parallelism borrows "
         "its ranks from the data- and context-parallel ones, so choose an ep that divides dp * cp (or change dp)",
         at.of({"parallel.ep", "parallel.dp", "parallel.cp"}), p.ep, p.dp, p.cp, product);
  }
  if (p.ep > 1 && r.model.n_experts == 0)
    fail("{}: parallel.ep = {} with a dense model (model.n_experts = 0): expert parallelism places the experts of "
         "mixture-of-experts layers; set parallel.ep = 1 or give the model experts",
         at.of({"parallel.ep", "model.n_experts"}), p.ep);
  if (p.ep > 1 && p.tp > 1 && !p.sp)
    fail("{}: parallel.ep = {} with parallel.tp = {} runs with sequence parallelism only: the tp ranks of a "
         "position each dispatch their share of its routed rows; set parallel.sp = true (train.seq_len a multiple of "
         "cp * tp), or parallel.ep = 1 or parallel.tp = 1",
         at.of({"parallel.ep", "parallel.tp", "parallel.sp"}), p.ep, p.tp);
  if (p.ep > 1 && r.model.n_experts % p.ep != 0)
    fail("{}: model.n_experts = {} does not divide over parallel.ep = {} ranks; every ep rank holds the same number "
         "of each layer's experts, so choose an ep that divides n_experts",
         at.of({"parallel.ep", "model.n_experts"}), r.model.n_experts, p.ep);
}

// Hybrid sharding (parallel/mesh.h): blocks of dp_shard consecutive dp ranks, so dp_shard divides
// dp; and ZeRO 0 shards nothing, so a block smaller than dp would mean nothing there (refused
// rather than ignored). With dp unset (0) both wait for the launch: check_recipe asks again.
void check_hybrid_sharding_rules(const Recipe& r, const Origins& at) {
  const ParallelSection& p = r.parallel;
  if (p.dp == 0 || p.dp_shard == 0 || p.dp_shard == p.dp) return;
  if (p.dp % p.dp_shard != 0)
    fail("{}: parallel.dp_shard = {} does not divide parallel.dp = {}; ZeRO shards over blocks of dp_shard "
         "consecutive data-parallel ranks, so choose a divisor of dp (or 0 for all of dp)",
         at.of({"parallel.dp_shard", "parallel.dp"}), p.dp_shard, p.dp);
  if (p.zero == 0)
    fail("{}: parallel.dp_shard = {} with parallel.zero = 0: ZeRO 0 shards nothing, so there is nothing to shard "
         "over blocks of dp_shard ranks; set parallel.zero to 1, 2 or 3, or leave dp_shard at 0",
         at.of({"parallel.dp_shard", "parallel.zero"}), p.dp_shard);
}

// What pipeline parallelism needs: stages of whole, equal layer ranges, and a schedule that
// can run the layout (parallel/pipeline_schedule.h).
void check_pipeline_rules(const Recipe& r, const Origins& at) {
  const ParallelSection& p = r.parallel;
  const std::int64_t stages = p.pp * p.virtual_stages;
  if (r.model.n_layers % stages != 0)
    fail("{}: model.n_layers = {} is not divisible by parallel.pp * parallel.virtual_stages = {} * {} = {}; every "
         "pipeline stage holds the same number of layers, so choose pp and virtual_stages whose product divides "
         "n_layers",
         at.of({"model.n_layers", "parallel.pp", "parallel.virtual_stages"}), r.model.n_layers, p.pp,
         p.virtual_stages, stages);
  const PipelineSchedule schedule = parse_pipeline_schedule(p.pp_schedule);
  // With dp unset (0) the micro-batch count waits for the launch (check_recipe asks again);
  // the rules that hold for any count are asked now, with a count (pp) that passes the others.
  const int micro_batches = p.dp == 0 ? static_cast<int>(p.pp) : static_cast<int>(r.grad_accum_steps());
  const std::string refusal = schedule_refusal(
      schedule, PipelineShape{static_cast<int>(p.pp), static_cast<int>(p.virtual_stages), micro_batches});
  // The micro-batch count is shown only when it was asked about: with dp unset it is not known.
  if (!refusal.empty() && p.dp == 0)
    fail("{}: {}", at.of({"parallel.pp_schedule", "parallel.pp", "parallel.virtual_stages"}), refusal);
  if (!refusal.empty())
    fail("{}: {} (micro-batches per step = train.global_batch / (train.micro_batch * parallel.dp) = {} / ({} * {}))",
         at.of({"parallel.pp_schedule", "parallel.pp", "parallel.virtual_stages", "train.global_batch",
                "train.micro_batch", "parallel.dp"}),
         refusal, r.train.global_batch, r.train.micro_batch, p.dp);
  if (schedule == PipelineSchedule::zero_bubble && p.zero >= 2)
    fail("{}: parallel.pp_schedule = \"zero-bubble\" with parallel.zero = {}: the zero-bubble schedule computes "
         "weight gradients long after the input gradients, which ZeRO-2/3's per-layer gradient buckets cannot hold; "
         "set parallel.zero to 0 or 1, or choose another schedule",
         at.of({"parallel.pp_schedule", "parallel.zero"}), p.zero);
  if (schedule == PipelineSchedule::zero_bubble && r.train.recompute != "none")
    fail("{}: parallel.pp_schedule = \"zero-bubble\" with train.recompute = \"{}\": its deferred weight gradients "
         "need every activation kept; set train.recompute = \"none\" or choose another schedule",
         at.of({"parallel.pp_schedule", "train.recompute"}), r.train.recompute);
}

// log.trace_steps: a step range inside the run. A range past train.steps is refused rather
// than cut short: the run would end before writing the trace that was asked for.
void check_trace_steps(const Recipe& r, const Origins& at) {
  std::optional<StepRange> range;
  try {
    range = parse_step_range(r.log.trace_steps);
  } catch (const UserError& error) {
    fail("{}: log.trace_steps = {}", at.of({"log.trace_steps"}), error.what());
  }
  // The spans of every traced step stay in memory until the end of the run, and writing them
  // takes a multiple of their size: a trace is for a few steps.
  constexpr std::int64_t kMaxTracedSteps = 20;
  if (range && range->last - range->first + 1 > kMaxTracedSteps)
    fail("{}: log.trace_steps = \"{}\" traces {} steps; at most {} are recorded (their spans are kept in memory "
         "until the trace is written): trace a shorter range, e.g. \"{}-{}\"",
         at.of({"log.trace_steps"}), abbreviate(r.log.trace_steps), range->last - range->first + 1, kMaxTracedSteps,
         range->first, range->first + kMaxTracedSteps - 1);
  if (range && range->last > r.train.steps) {
    const std::string within = range->first < r.train.steps ? fmt::format("{}-{}", range->first, r.train.steps)
                                                            : fmt::format("{}", r.train.steps);
    fail("{}: log.trace_steps = \"{}\" reaches past train.steps = {}; trace steps within 1..{} (e.g. \"{}\") or "
         "train for more steps",
         at.of({"log.trace_steps", "train.steps"}), abbreviate(r.log.trace_steps), r.train.steps, r.train.steps,
         within);
  }
}

// The model's own rules: heads that group evenly, an even head_dim for RoPE, llama3
// scaling's factors in order.
void check_model_rules(const Recipe& r, const Origins& at) {
  const ModelSection& m = r.model;
  if (m.n_kv_heads > m.n_heads) {
    fail("{}: model.n_kv_heads = {} exceeds model.n_heads = {}; each key/value head serves "
         "one or more query heads, so set n_kv_heads <= n_heads",
         at.of({"model.n_kv_heads", "model.n_heads"}), m.n_kv_heads, m.n_heads);
  }
  if (m.n_heads % m.n_kv_heads != 0) {
    fail("{}: model.n_heads = {} is not a multiple of model.n_kv_heads = {}; every key/value "
         "head must serve the same number of query heads, so choose n_kv_heads dividing n_heads",
         at.of({"model.n_heads", "model.n_kv_heads"}), m.n_heads, m.n_kv_heads);
  }
  if (m.d_model % m.n_heads != 0) {
    fail("{}: model.d_model = {} is not divisible by model.n_heads = {}; each head gets "
         "d_model / n_heads dimensions, so change one of them",
         at.of({"model.d_model", "model.n_heads"}), m.d_model, m.n_heads);
  }
  if (r.head_dim() % 2 != 0) {
    fail("{}: head_dim = model.d_model / model.n_heads = {} / {} = {} is odd; RoPE rotates "
         "pairs of dimensions, so choose d_model and n_heads that give an even head_dim",
         at.of({"model.d_model", "model.n_heads"}), m.d_model, m.n_heads, r.head_dim());
  }
  if (m.rope_scaling == "llama3" && m.rope_high_freq_factor <= m.rope_low_freq_factor) {
    fail("{}: model.rope_high_freq_factor = {} is not above model.rope_low_freq_factor = {}; llama3 RoPE scaling "
         "blends the frequencies between the two wavelength limits, so the high factor must be the larger",
         at.of({"model.rope_high_freq_factor", "model.rope_low_freq_factor", "model.rope_scaling"}),
         m.rope_high_freq_factor, m.rope_low_freq_factor);
  }
}

// A mixture of experts' rules: top-k within the experts, at least one MoE layer.
void check_moe_rules(const Recipe& r, const Origins& at) {
  const ModelSection& m = r.model;
  const bool balancing = m.router_seq_aux_loss > 0 || m.router_bias_update_rate > 0;
  if (m.n_experts == 0) {
    if (balancing)
      fail("{}: expert balancing needs experts; set model.n_experts > 0, or leave model.router_seq_aux_loss and "
           "model.router_bias_update_rate at 0 for a dense model",
           at.of({"model.router_seq_aux_loss", "model.router_bias_update_rate", "model.n_experts"}));
    return;
  }
  if (balancing && m.experts_per_token == m.n_experts)
    fail("{}: with model.experts_per_token = model.n_experts = {} every token goes to every expert, so there is "
         "nothing to balance; set model.router_seq_aux_loss and model.router_bias_update_rate to 0, or route to "
         "fewer experts",
         at.of({"model.router_seq_aux_loss", "model.router_bias_update_rate", "model.experts_per_token"}),
         m.n_experts);
  if (m.experts_per_token > m.n_experts)
    fail("{}: model.experts_per_token = {} exceeds model.n_experts = {}; a token is routed to that many distinct "
         "experts, so set experts_per_token <= n_experts",
         at.of({"model.experts_per_token", "model.n_experts"}), m.experts_per_token, m.n_experts);
  if (m.first_dense_layers >= m.n_layers)
    fail("{}: model.first_dense_layers = {} leaves none of the model.n_layers = {} layers to the experts; lower "
         "first_dense_layers, or set model.n_experts = 0 for a dense model",
         at.of({"model.first_dense_layers", "model.n_layers", "model.n_experts"}), m.first_dense_layers, m.n_layers);
}

// The training run's rules: vocabulary, sequence length, batch sizes, validation and the
// learning-rate floor.
void check_training_rules(const Recipe& r, const Origins& at) {
  const ModelSection& m = r.model;
  if (r.data.tokenizer == "byte" && m.vocab_size != 0 && m.vocab_size < 256) {
    fail("{}: model.vocab_size = {} is smaller than the 256 tokens of data.tokenizer = "
         "\"byte\"; set model.vocab_size >= 256",
         at.of({"model.vocab_size", "data.tokenizer"}), m.vocab_size);
  }
  const TrainSection& t = r.train;
  if (t.seq_len > m.max_seq_len) {
    fail("{}: train.seq_len = {} exceeds model.max_seq_len = {}; lower train.seq_len or raise "
         "model.max_seq_len",
         at.of({"train.seq_len", "model.max_seq_len"}), t.seq_len, m.max_seq_len);
  }
  // Compared by division first: micro_batch * dp may not fit in 64 bits. An unset dp (0)
  // waits for the launch; a global batch that is no multiple of micro_batch fails now.
  const std::int64_t dp = std::max<std::int64_t>(r.parallel.dp, 1);
  const bool fits = t.micro_batch <= t.global_batch / dp;
  if (!fits || t.global_batch % (t.micro_batch * dp) != 0) {
    fail("{}: train.global_batch = {} is not a multiple of train.micro_batch * parallel.dp = "
         "{} * {}; gradient accumulation needs a whole number of micro-batches per rank, so "
         "make global_batch a multiple of micro_batch * dp",
         at.of({"train.global_batch", "train.micro_batch", "parallel.dp"}), t.global_batch,
         t.micro_batch, dp);
  } else if (t.global_batch / (t.micro_batch * dp) > std::numeric_limits<int>::max()) {
    // Schedules count micro-batches in an int: a larger count would wrap.
    fail("{}: train.global_batch = {} makes {} micro-batches per step on each rank (global_batch / (micro_batch "
         "* dp)), more than the {} a step can hold; lower global_batch or raise micro_batch",
         at.of({"train.global_batch", "train.micro_batch", "parallel.dp"}), t.global_batch,
         t.global_batch / (t.micro_batch * dp), std::numeric_limits<int>::max());
  }
  if (t.eval_interval > 0 && t.eval_batches < 1) {
    fail("{}: train.eval_batches = {} with train.eval_interval = {}; a validation pass needs at "
         "least one batch, so set eval_batches >= 1, or eval_interval = 0 to disable validation",
         at.of({"train.eval_batches", "train.eval_interval"}), t.eval_batches, t.eval_interval);
  }
  if (r.schedule.min_lr > r.optim.lr) {
    fail("{}: schedule.min_lr = {} exceeds optim.lr = {}; the schedule decays from optim.lr "
         "down to min_lr, so set min_lr <= lr",
         at.of({"schedule.min_lr", "optim.lr"}), r.schedule.min_lr, r.optim.lr);
  }
}

// One source of data, data.path or data.blend, and a blend that parses.
void check_data_rules(const Recipe& r, const Origins& at) {
  if (r.data.path.empty() && r.data.blend.empty()) {
    fail("{}: data.path is not set; run `ustrain data convert` first and set data.path to the "
         "dataset directory it writes (or data.blend to several)",
         at.of({"data.path"}));
  }
  if (!r.data.path.empty() && !r.data.blend.empty()) {
    fail("{}: both data.path and data.blend are set; data.blend lists every dataset with its weight, so "
         "remove data.path or list it in the blend",
         at.of({"data.path", "data.blend"}));
  }
  if (!r.data.blend.empty()) {
    try {
      parse_blend(r.data.blend);
    } catch (const UserError& error) {
      fail("{}: data.{}", at.of({"data.blend"}), error.what());
    }
  }
}

// One group of rules, whose first refusal is kept unless it judged a refused key's default.
bool check_group(RecipeErrors& errors, const Origins& at, const std::function<void()>& rules) {
  at.forget_named();
  return errors.attempt(rules, [&] { return !at.named_refused(); });
}

void check_model_size(const Recipe& r, const Origins& at) {
  if (const std::optional<std::string> problem = model_size_problem(r))
    fail("{}: {}", at.of({"model.n_layers", "model.d_model", "model.vocab_size", "model.ffn_hidden", "model.n_heads",
                          "model.n_kv_heads", "train.micro_batch", "train.seq_len"}),
         *problem);
}

}  // namespace

// Each message names every key involved with its value. The groups ask about different things,
// so each reports its first refusal; the pipeline's schedule builds on the batch (micro-batches
// per step), and the model's size on a layout every other rule accepts.
void check_cross_field_rules(const Recipe& r, const Origins& at, RecipeUse use, RecipeErrors& errors) {
  bool sound = check_group(errors, at, [&] { check_model_rules(r, at); });
  sound = check_group(errors, at, [&] { check_moe_rules(r, at); }) && sound;
  if (use == RecipeUse::model) return;  // the rest is about the data and the training run
  const bool batch_ok = check_group(errors, at, [&] { check_training_rules(r, at); });
  for (void (*rules)(const Recipe&, const Origins&) :
       {check_context_parallel_rules, check_tensor_parallel_rules, check_expert_parallel_rules,
        check_hybrid_sharding_rules, check_trace_steps, check_data_rules})
    sound = check_group(errors, at, [&] { rules(r, at); }) && sound;
  if (batch_ok) sound = check_group(errors, at, [&] { check_pipeline_rules(r, at); }) && sound;
  if (sound && batch_ok) check_group(errors, at, [&] { check_model_size(r, at); });
}

namespace {

// FP8 on CUDA runs cuBLASLt's FP8 GEMMs (kernels/cuda/fp8/lt_fp8_gemm.h), whose sizes are multiples
// of 16; the routed experts' GEMMs take whatever number of tokens the router sends them.
void check_cuda_fp8(const Recipe& r, const Origins& at) {
  const ModelSection& m = r.model;
  if (m.n_experts > 0) {
    fail("{}: train.precision = \"fp8\" with device.type = \"cuda\" trains dense models only in this build (the "
         "experts' FP8 GEMMs would take token counts that are not multiples of 16); set model.n_experts = 0, "
         "train.precision = \"bf16\", or device.type = \"cpu\"",
         at.of({"train.precision", "device.type", "model.n_experts"}));
  }
  const std::int64_t tp = std::max<std::int64_t>(r.parallel.tp, 1), cp = std::max<std::int64_t>(r.parallel.cp, 1);
  const struct {
    const char* what;
    std::int64_t value;
  } sizes[] = {
      {"model.d_model", m.d_model},
      {"the head size model.d_model / model.n_heads", m.n_heads > 0 ? m.d_model / m.n_heads : 0},
      {"model.ffn_hidden / parallel.tp", m.ffn_hidden / tp},
      {"the tokens of a micro-batch, train.micro_batch * train.seq_len / parallel.cp",
       r.train.micro_batch * r.train.seq_len / cp},
  };
  for (const auto& size : sizes)
    if (size.value % 16 != 0)
      fail("{}: train.precision = \"fp8\" with device.type = \"cuda\" needs FP8 GEMM sizes that are multiples of 16 "
           "(cuBLASLt's FP8 GEMMs), but {} is {}; choose sizes that are, or train.precision = \"bf16\"",
           at.of({"train.precision", "device.type"}), size.what, size.value);
}

// What this build cannot run yet. As features land, their lines are deleted from here.
void check_build_support(const Recipe& r, const Origins& at) {
  if (r.train.precision == "fp8" && r.device.type == "cuda") check_cuda_fp8(r, at);
}

}  // namespace

void check_supported_by_this_build(const Recipe& r, const Origins& at, RecipeErrors& errors) {
  check_group(errors, at, [&] { check_build_support(r, at); });
}

void check_recipe(const Recipe& r) {
  const Origins origins(r.source);
  RecipeErrors errors;
  check_cross_field_rules(r, origins, RecipeUse::run, errors);
  check_supported_by_this_build(r, origins, errors);
  errors.throw_if_any(r.source);
}

}  // namespace ustrain
