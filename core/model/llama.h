// The Llama-style decoder: token embedding, N transformer blocks, final RMSNorm, output head
// (optionally tied to the embedding) and fused cross-entropy.
//
// One LlamaModel is what one rank holds: the chunks of its pipeline stages (core/model/
// model_chunk.h; the whole model at pp = 1) and their parameters, this rank's part of each
// under tensor parallelism. The model plans its parameters, activation slots and scratch for
// micro-batches of at most max_batch sequences of the geometry's length, then runs on views of
// the planned memory. It knows nothing of parallelism: its sizes come from the geometry
// (core/recipe/geometry.h), where its parameters live is decided by a separate sharding step
// (core/distributed/parallelize.h) between construction and plan(), tensor parallelism reaches
// it only as the LayerParallel context its layers call (core/model/layer_parallel.h), and a
// pipeline executor drives its chunks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/recipe/geometry.h"
#include "core/model/kv_cache.h"
#include "core/model/model_chunk.h"
#include "core/model/param_hooks.h"
#include "core/model/params.h"
#include "core/model/recompute.h"
#include "core/model/transformer_block.h"
#include "core/recipe/recipe.h"

namespace ustrain {

// How many micro-batches each chunk keeps at once (the schedule's peak), how many received
// tensors wait for their compute, and whether the backward is split in B and W passes. By
// default one slot per chunk: one micro-batch at a time, as without a pipeline.
struct SlotPlan {
  std::vector<int> slots;            // per chunk; empty: 1 each
  std::vector<int> receive_buffers;  // per chunk; empty: 0 each
  bool split_backward = false;
  // Micro-batches whose per-token losses the last stage keeps on the device until they are
  // read together (a training step's, so that a step reads its losses once).
  int kept_losses = 1;
};

class LlamaModel {
 public:
  // This rank's part of the model, `geometry` (copied, with its sequence length), for
  // micro-batches of at most `max_batch` sequences. `compute`: the dtype of activations and of
  // the weights' compute copy (f32, bf16, f16); statistics, gradients, master weights and
  // optimizer state stay fp32. `parallel` (its groups not owned) carries tensor and sequence,
  // context and expert parallelism; none: one rank's (a model planned for more ranks can then
  // be planned, not run).
  LlamaModel(const ModelSection& cfg, const ModelGeometry& geometry, std::int64_t max_batch, Recompute policy,
             DType compute = DType::f32, std::optional<LayerParallel> parallel = std::nullopt);
  // The whole model on one rank, for micro-batches of at most (max_batch, max_seq) tokens.
  LlamaModel(const ModelSection& cfg, std::int64_t max_batch, std::int64_t max_seq, Recompute policy,
             DType compute = DType::f32);
  // Chunks and blocks refer to the model: it stays where it was built.
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  // Every parameter of the whole model as the model declares it (names, global shapes): what
  // a checkpoint lists, whatever part of it a rank holds.
  static std::vector<ParamDecl> declaration(const ModelSection& cfg);
  // The same for the model state outside the parameters (router_biases()): name and shape.
  static std::vector<ParamDecl> state_declaration(const ModelSection& cfg);

  // Units of parameters (core/model/params.h): 0 the embedding (and a tied head on the same
  // rank), l + 1 block l, L + 1 the final norm and an untied head, L + 2 the last stage's copy
  // of a tied embedding (pipeline parallelism).
  void plan(MemoryPlan& plan, const ParamShardings& sharding = {}, const SlotPlan& slots = {});
  void bind(const PlannedMemory& mem, Backend& backend);  // also fills the RoPE tables
  void initialise(Backend& backend, std::uint64_t seed) const { params_.initialise(backend, seed); }

  int chunks() const { return static_cast<int>(chunks_.size()); }
  ModelChunk& chunk(int c) { return *chunks_.at(static_cast<std::size_t>(c)); }

  // The whole model on one rank (evaluation, sampling, tests): forward through the loss for
  // `tokens` (B, S) on the host (targets < 0 are ignored), returning the SUM of per-token
  // losses; backward of that forward with dL/d(loss_i) = dloss. Parameter gradients accumulate.
  double forward(Backend& be, const TokenBatch& tokens, std::int64_t B, std::int64_t S);
  void backward(Backend& be, float dloss);
  // Decoding one sequence (sampling), never training, the whole model on one rank: the forward
  // of `count` new tokens `ids` (on the host) at positions cache.length() .. + count - 1 against
  // the keys and values `cache` holds of the positions before, which theirs join. Returns the
  // logits (1, V) of the last new position, valid until the cache's next step.
  Tensor decode(Backend& be, KvCache& cache, const std::int32_t* ids, std::int64_t count);
  // Logits (B * S, V) of the last forward (this rank's vocabulary shard under tensor
  // parallelism); valid until the next backward.
  Tensor logits() const;
  // The per-token losses of kept micro-batches, (kept, max_batch * max_seq) fp32 on the device
  // (the last stage only; empty elsewhere): a pipeline executor has micro-batch after
  // micro-batch write a row and reads the rows together.
  Tensor kept_losses() const { return kept_losses_view_; }

  // The routing statistics of this rank's mixture-of-experts layers since the last reset, in
  // layer order (none for a dense model).
  std::vector<const MoeLoad*> moe_loads() const;
  void reset_moe_loads();
  // The routing biases of this rank's MoE layers where auxiliary-loss-free balancing is on, in
  // layer order (model state outside the parameters: core/step/router_balance.h).
  std::vector<RouterBias*> router_biases();
  std::vector<const RouterBias*> router_biases() const;

  // Told of every use of a unit of parameters (core/model/param_hooks.h), e.g. by a
  // data-parallel engine; null (the default) for none. Not owned.
  void set_param_hooks(ParamUseHooks* hooks) { hooks_ = hooks; }

  const std::vector<TransformerBlock>& blocks() const { return blocks_; }  // this rank's layers, in order
  ModelParams& params() { return params_; }
  const ModelParams& params() const { return params_; }
  const ModelSection& config() const { return cfg_; }
  const ModelGeometry& geometry() const { return geo_; }
  Recompute recompute() const { return policy_; }
  DType compute_dtype() const { return compute_; }

  // The N of DESIGN.md's FLOPs convention, of the whole model (ModelGeometry::matmul_params).
  std::int64_t matmul_params() const { return geo_.matmul_params(); }
  // Model FLOPs per token of the whole model for sequence length S: 6 N + 6 L d S (attention
  // counted as causal: a token's scores and values cover half the window on average), or with
  // `full_window` 6 N + 12 L d S, the convention torchtitan, nanotron and OLMo-core publish MFU in.
  double flops_per_token(std::int64_t S, bool full_window = false) const;

 private:
  ModelSection cfg_;
  ModelGeometry geo_;
  TensorParallel no_tp_;  // the one-rank defaults
  RingAttention no_cp_;
  ExpertDispatcher no_ep_;
  LayerParallel par_;
  std::int64_t max_batch_;
  Recompute policy_;
  DType compute_;
  ModelParams params_;
  std::vector<TransformerBlock> blocks_;  // the layers of every chunk, in order
  std::vector<MoeLoad> moe_loads_;        // what its MoE layers record, in layer order
  std::vector<std::unique_ptr<ModelChunk>> chunks_;
  ParamUseHooks* hooks_ = nullptr;
  int rope_cos_ = -1, rope_sin_ = -1, branch_ = -1;
  int d_resid_ = -1, d_branch_ = -1, d_norm_ = -1;
  std::vector<int> attention_workspace_;  // what the sub-layers list
  std::map<std::string, std::vector<int>> mlp_workspace_;  // per kind of MLP
  int sp_gathered_ = -1, sp_d_full_ = -1;  // sequence parallelism's full-row scratch
  int kept_losses_ = -1;
  Tensor kept_losses_view_;
};

}  // namespace ustrain
