// The Llama-style decoder: token embedding, N transformer blocks, final RMSNorm, output
// head (optionally tied to the embedding) and fused cross-entropy.
//
// The model plans its own parameters, activations and workspace for at most
// (max_batch, max_seq) tokens per micro-batch, then runs on views of the planned memory.
// A call may use a smaller (B, S), e.g. for sampling. It knows nothing of parallelism: its
// sizes come from the geometry (core/model/geometry.h), where its parameters live is decided
// by a separate sharding step (core/distributed/parallelize.h) between construction and
// plan(), and tensor parallelism reaches it only as the TensorParallel object it calls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/model/geometry.h"
#include "core/model/param_hooks.h"
#include "core/model/params.h"
#include "core/model/recompute.h"
#include "core/model/transformer_block.h"
#include "core/recipe.h"

namespace ustrain {

class LlamaModel {
 public:
  // `compute`: the dtype of activations and of the weights' compute copy (f32, bf16, f16);
  // statistics, gradients, master weights and optimizer state stay fp32.
  // `tp` (not owned) carries tensor and sequence parallelism; null for one rank. Its size
  // and rank must be the geometry's.
  LlamaModel(const ModelSection& cfg, std::int64_t max_batch, std::int64_t max_seq, Recompute policy,
             DType compute = DType::f32, const ModelGeometry* geometry = nullptr, TensorParallel* tp = nullptr);
  // Blocks refer to the model's ParamSet: the model stays where it was built.
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  // Units of parameters (core/model/params.h): 0 the embedding (and a tied head), 1..L the
  // blocks, L + 1 the final norm and an untied head.
  void plan(MemoryPlan& plan, ParamSharding sharding = {});
  void bind(const PlannedMemory& mem, Backend& backend);  // also fills the RoPE tables
  void initialise(Backend& backend, std::uint64_t seed) const { params_.initialise(backend, seed); }

  // Forward through the loss for ids/targets (B, S) on the host; targets < 0 are ignored.
  // Returns the SUM of per-token losses (host double).
  double forward(Backend& be, const std::int32_t* ids, const std::int32_t* targets, std::int64_t B,
                 std::int64_t S);
  // Backward of the last forward with dL/d(loss_i) = dloss for every counted token.
  // Parameter gradients accumulate.
  void backward(Backend& be, float dloss);
  // Told of every use of a unit of parameters (core/model/param_hooks.h), e.g. by a
  // data-parallel engine; null (the default) for none. Not owned.
  void set_param_hooks(ParamUseHooks* hooks) { hooks_ = hooks; }

  // Logits (B * S, V) of the last forward (this rank's vocabulary shard under tensor
  // parallelism); valid until the next backward.
  Tensor logits() const { return last_logits_; }

  ParamSet& params() { return params_; }
  const ParamSet& params() const { return params_; }
  const ModelSection& config() const { return cfg_; }
  const ModelGeometry& geometry() const { return geo_; }
  Recompute recompute() const { return policy_; }
  DType compute_dtype() const { return compute_; }

  // Parameters that take part in a matrix multiply (the output head included, the embedding
  // lookup not): the N of DESIGN.md's FLOPs convention.
  std::int64_t matmul_params() const;
  // Model FLOPs per token for sequence length S: 6 N + 6 L d S.
  double flops_per_token(std::int64_t S) const;

 private:
  struct LayerActivationHandles {
    int ln1_rstd, ln1_out, qkv, att, lse, x_mid, ln2_rstd, ln2_out, gate_up, act;
  };
  BlockActivations block_views(int layer, std::int64_t B, std::int64_t S) const;
  BlockGradients grad_views(std::int64_t B, std::int64_t S) const;
  Tensor rows(int handle, std::int64_t n) const;  // the first n rows of a planned (rows, cols) entry

  ModelSection cfg_;
  ModelGeometry geo_;
  TensorParallel no_tp_;  // the one-rank default
  TensorParallel* tp_;
  std::int64_t max_batch_, max_seq_;
  Recompute policy_;
  DType compute_;
  ParamSet params_;
  int embed_ = -1, final_norm_ = -1, head_ = -1;  // head_ == embed_ when tied
  std::vector<TransformerBlock> blocks_;
  ParamUseHooks* hooks_ = nullptr;
  void acquire(int unit, bool backward) const { if (hooks_) hooks_->acquire(unit, backward); }
  void release(int unit) const { if (hooks_) hooks_->release(unit); }
  void grads_done(int unit) const { if (hooks_) hooks_->grads_done(unit); }

  // Plan handles.
  int ids_ = -1, targets_ = -1, rope_cos_ = -1, rope_sin_ = -1;
  std::vector<int> resid_;  // L + 1 residual-stream tensors (N, D)
  std::vector<LayerActivationHandles> layer_acts_;
  int final_rstd_ = -1, final_out_ = -1, logits_ = -1, losses_ = -1, ce_lse_ = -1, ce_parts_ = -1, branch_ = -1;
  int d_resid_ = -1, d_branch_ = -1, d_norm_ = -1, d_att_ = -1, d_qkv_ = -1, d_gate_up_ = -1, d_act_ = -1;
  int sp_gathered_ = -1, sp_d_full_ = -1;  // sequence parallelism's full-row scratch

  const PlannedMemory* mem_ = nullptr;
  RopeTables rope_;
  // State of the last forward, for backward.
  std::int64_t last_b_ = 0, last_s_ = 0;
  Tensor last_logits_;
  std::vector<float> host_losses_;
};

}  // namespace ustrain
