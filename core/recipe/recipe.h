// Recipe: the typed, validated configuration of a run, read from TOML.
//
// Every key has a default, a type, a range and a one-line meaning in one schema
// (core/recipe/recipe_schema.cpp); the recipe reference in docs/recipes.md and `--dry-run`
// are printed from it. Errors are UserError with "FILE:LINE: key: what is wrong; how to fix it".
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ustrain {

// The largest fp16 loss scale, to start with or to grow to: 2^32, Megatron-LM's default first
// scale (PyTorch's and DeepSpeed's is 2^16). Gradients that overflow halve the scale, so even
// this start reaches 1 within 32 skipped steps; a larger one only skips more steps first.
constexpr double kMaxLossScale = 4294967296.0;

struct RunSection {
  std::string name = "run";
  std::uint64_t seed = 1234;
  std::string output_dir = "runs";  // the run directory is output_dir/name

  bool operator==(const RunSection&) const = default;
};

struct ModelSection {
  std::int64_t vocab_size = 0;  // 0: the dataset's (core/recipe/recipe_defaults.h)
  std::int64_t d_model = 256;
  std::int64_t n_layers = 4;
  std::int64_t n_heads = 8;
  std::int64_t n_kv_heads = 4;
  std::int64_t ffn_hidden = 768;
  double rope_theta = 10000.0;
  // RoPE frequency scaling for contexts beyond the original one (core/model/rope_frequencies.h).
  std::string rope_scaling = "none";  // none | llama3
  double rope_scaling_factor = 8.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  std::int64_t rope_original_max_seq_len = 8192;
  double norm_eps = 1e-5;
  bool tied_embeddings = false;
  std::int64_t max_seq_len = 256;
  std::int64_t sliding_window = 0;  // keys each query attends to, itself included; 0: all before it
  double init_std = 0.02;
  // Mixture of experts (core/model/moe_mlp.h); 0 experts: every MLP is dense.
  std::int64_t n_experts = 0;
  std::int64_t experts_per_token = 2;        // top-k
  std::int64_t expert_ffn_hidden = 0;        // 0: ffn_hidden
  std::int64_t n_shared_experts = 0;
  std::int64_t shared_expert_ffn_hidden = 0;  // 0: expert_ffn_hidden
  std::int64_t moe_layer_interval = 1;       // every n-th layer after the first dense ones
  std::int64_t first_dense_layers = 0;
  std::string router_score = "softmax";      // softmax | sigmoid
  bool router_renormalize = true;            // top-k gate weights divided by their sum
  double router_z_loss = 0.0;                // coefficient of the router z-loss
  double router_seq_aux_loss = 0.0;          // coefficient of the sequence-level balance loss
  double router_bias_update_rate = 0.0;      // auxiliary-loss-free balancing's bias step

  bool operator==(const ModelSection&) const = default;
};

struct DataSection {
  std::string path;              // dataset directory written by `ustrain data convert`
  std::string tokenizer = "auto";  // auto (the dataset's) | byte | sentencepiece | external
  std::string blend;             // "dirA:0.7,dirB:0.3": several datasets instead of path
  std::int64_t prefetch = 4;     // micro-batches read ahead on a background thread; 0: none
  std::string verify = "checksums";  // checksums | sizes: what opening the data checks

  bool operator==(const DataSection&) const = default;
};

struct TrainSection {
  std::int64_t steps = 100;
  std::int64_t micro_batch = 8;    // sequences per micro-batch per data-parallel rank
  std::int64_t global_batch = 8;   // sequences per optimizer step, all ranks together
  std::int64_t seq_len = 256;
  double grad_clip = 1.0;          // 0 disables clipping
  std::string precision = "fp32";  // fp32 | bf16 | fp16 | fp8
  // fp8: how the linear layers' GEMM operands are scaled (kernels/fp8/fp8_scaling.h)
  std::string fp8_recipe = "delayed";     // delayed | current | rowwise | blockwise
  std::string fp8_grad_format = "e5m2";   // e5m2 | e4m3: the gradients' format
  std::int64_t fp8_amax_history = 1024;   // delayed: steps of amax history
  std::int64_t fp8_margin = 0;            // scales divided by 2^margin
  std::string recompute = "none";  // none | selective | full
  bool document_mask = false;      // a token attends only to its own document of the packed window
  std::int64_t eval_interval = 50; // 0 disables periodic validation
  std::int64_t eval_batches = 8;
  std::int64_t max_bad_steps = 5;  // non-finite steps in a row that stop training
  std::int64_t replica_check_interval = 100;        // steps between comparisons of parameter replicas; 0 = off
  bool replica_check_grads = false;                 // the same steps also compare the reduced gradients (ZeRO 0)
  double loss_scale_init = 65536.0;                 // fp16: the first loss scale, at most kMaxLossScale
  std::int64_t loss_scale_growth_interval = 2000;   // fp16: clean steps before it doubles

  bool operator==(const TrainSection&) const = default;
};

struct OptimSection {
  std::string name = "adamw";  // adamw | muon (core/distributed/optimizer.h)
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  std::int64_t muon_ns_steps = 5;

  bool operator==(const OptimSection&) const = default;
};

struct ScheduleSection {
  std::int64_t warmup_steps = 0;
  std::string decay = "cosine";   // cosine | linear | wsd | constant
  double min_lr = 0.0;
  double wsd_decay_fraction = 0.2; // wsd: share of steps in the final decay

  bool operator==(const ScheduleSection&) const = default;
};

struct ParallelSection {
  // manual: the keys below as given; auto: the planner's fastest layout that fits the launch,
  // with the keys set by hand kept (core/train/auto_layout.h).
  std::string layout = "manual";  // manual | auto
  std::int64_t dp = 0;  // 0: the processes launched / (tp * pp * cp) (core/recipe/recipe_defaults.h)
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  std::int64_t cp = 1;
  std::int64_t ep = 1;  // borrowed from dp * cp, which it divides (parallel/mesh.h)
  // Rows an ep rank receives per dispatch round, as a multiple of the rows it routes itself
  // (its micro-batch's tokens x experts_per_token); more take another round (parallel/expert_dispatch.h).
  double ep_capacity_factor = 2.0;
  std::int64_t zero = 0;
  // Hybrid sharding: ZeRO shards over blocks of dp_shard consecutive dp ranks, replicated
  // across the blocks (parallel/mesh.h); 0 means all of dp.
  std::int64_t dp_shard = 0;
  bool sp = true;            // sequence parallelism (with tp > 1)
  bool overlap_comm = true;  // reduce gradients during backward, prefetch ZeRO-3 layers
  std::string pp_schedule = "1f1b";  // afab | 1f1b | interleaved | zero-bubble
  std::int64_t virtual_stages = 1;
  double comm_timeout_s = 30;     // deadline of a collective before the ranks it waits for are checked
  double startup_timeout_s = 20;  // the same for the start-up handshake
  std::string device_comm = "auto";  // auto | nccl | staged: how device tensors travel between ranks

  // The dp ranks a ZeRO shard group spans (dp_shard, or all of dp when 0).
  std::int64_t shard_dp() const { return dp_shard == 0 ? dp : dp_shard; }

  bool operator==(const ParallelSection&) const = default;
};

struct CheckpointSection {
  std::int64_t interval = 0;    // steps between checkpoints; 0 = only at the end
  std::int64_t keep_last = 3;   // the newest checkpoints kept on disk
  std::int64_t keep_every = 0;  // also keep each checkpoint whose step is a multiple; 0 = none
  bool async = true;            // write in the background while training continues
  std::string init_from;        // checkpoint whose weights start a new run (fine-tuning)

  bool operator==(const CheckpointSection&) const = default;
};

struct LogSection {
  std::int64_t interval = 10;
  bool jsonl = true;
  bool tensorboard = true;
  std::string level = "info";  // trace | debug | info | warn | error
  std::string trace_steps;      // "" (off), "10-12" or "10": a Chrome trace of those steps

  bool operator==(const LogSection&) const = default;
};

struct EvalSection {
  std::string tasks;          // task files (JSONL), comma-separated; a TOML array of paths reads as this
  std::int64_t interval = 0;  // steps between task evaluations; 0 = only after the last step

  bool operator==(const EvalSection&) const = default;
};

struct DeviceSection {
  std::string type = "cpu";  // cpu | cuda
  std::int64_t threads = 0;  // CPU threads; 0 = all cores
  std::string memory_check = "refuse";  // refuse | warn: what a plan larger than the memory left gets

  bool operator==(const DeviceSection&) const = default;
};

struct Recipe {
  RunSection run;
  ModelSection model;
  DataSection data;
  TrainSection train;
  OptimSection optim;
  ScheduleSection schedule;
  ParallelSection parallel;
  CheckpointSection checkpoint;
  LogSection log;
  EvalSection eval;
  DeviceSection device;

  std::string source;  // the file it came from, for messages

  std::int64_t head_dim() const { return model.d_model / model.n_heads; }
  // Micro-batches per rank and step; needs parallel.dp resolved.
  std::int64_t grad_accum_steps() const;
  std::string run_dir() const;
  // Whether the keys a recipe may leave to the dataset and the launch (model.vocab_size = 0,
  // data.tokenizer = "auto", parallel.dp = 0) hold their values (core/recipe/recipe_defaults.h).
  bool resolved() const;

  // Field-by-field equality, `source` included (exact for floats: a round trip must be exact).
  bool operator==(const Recipe&) const = default;
};

// What a recipe is read for: a run (train, eval, bench) is checked whole and needs data.path
// or data.blend; a model's description (the recipe of `ckpt import`, the one a checkpoint
// keeps) is checked only for its model and what this build supports.
enum class RecipeUse { run, model };

// Parse a TOML file, apply `key=value` overrides (TOML syntax for the value; a bare word
// is a string), check types, ranges and cross-field rules, and what this build supports.
// Rules that involve a key left unset (resolved() is false) wait for check_recipe.
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides = {},
                   RecipeUse use = RecipeUse::run);
// The same from TOML text; `source` names it in messages.
Recipe parse_recipe(const std::string& toml_text, const std::string& source,
                    const std::vector<std::string>& overrides = {}, RecipeUse use = RecipeUse::run);

// The keys ("parallel.tp") the recipe file at `path` writes and the `overrides` set: those a
// user chose, as against the defaults. For a recipe load_recipe accepted.
std::set<std::string> keys_set_by_hand(const std::string& path, const std::vector<std::string>& overrides);
// The keys the `overrides` ("KEY=VALUE", as --set takes them) set.
std::set<std::string> override_keys(const std::vector<std::string>& overrides);

// The cross-field and build rules again, after keys left unset were filled in; messages name
// the recipe's source.
void check_recipe(const Recipe& r);

// The resolved recipe as TOML, every key present (defaults filled in).
std::string to_toml(const Recipe& r);
// Every key ("train.steps") with its value as a TOML literal, in the reference's order.
std::vector<std::pair<std::string, std::string>> recipe_values(const Recipe& r);

// The recipe reference table as Markdown (key, type, default, meaning).
std::string recipe_reference_markdown();

}  // namespace ustrain
