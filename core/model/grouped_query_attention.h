// The attention of a Llama block (an Attention kind, core/model/attention.h): pre-norm, fused
// q/k/v projection, RoPE, causal grouped-query attention and the output projection,
//
//   attention(x) = o_proj(attention(rope(qkv_proj(rmsnorm(x)))))
//
// whose sum with x the block takes. Under tensor parallelism q/k/v are column-parallel over
// this rank's heads (whole GQA groups) and o_proj row-parallel. Under context parallelism
// the rank holds part of every sequence and the attention is a ring (parallel/ring_attention.h).
// The mask is causal, limited to model.sliding_window keys when set, and to each token's own
// document when the micro-batch carries document ids (train.document_mask).
//
// Sizes are this rank's (core/model/geometry.h): H and Hkv its heads and kv heads, Dh the head
// width, W = (H + 2 Hkv) Dh, and N, R, D as in core/model/sublayer.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/attention.h"
#include "core/model/geometry.h"
#include "core/recipe/recipe.h"

namespace ustrain {

class GroupedQueryAttention final : public Attention {
 public:
  // Declares q/k/v/o (global shapes) in `unit` of `params`; declare_norm() follows once every
  // sub-layer of the block has declared its matrices (the order checkpoints list them in).
  GroupedQueryAttention(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geometry,
                        ParamRegistry& params);
  void declare_norm(ParamRegistry& params) override;

  // For micro-batches of at most `max_batch` sequences (core/model/sublayer.h).
  std::vector<ActivationSpec> activations(std::int64_t max_batch, DType compute) const override;
  std::vector<ActivationSpec> deferred(std::int64_t max_batch, DType compute) const override;
  std::vector<ActivationSpec> workspace(std::int64_t max_batch, DType compute) const override;
  // Decoding, never training: the layer's key/value cache for one sequence, and the tensors
  // a decode step of up to S_max positions works in.
  ActivationSpec kv_cache(DType compute) const override;
  std::vector<ActivationSpec> decode_activations(DType compute) const override;

  // attention(x) for x (R, D), as this rank's rows (R, D): in `out`, or in s.branch (which
  // holds the o_proj output, its partial sums under tensor parallelism).
  Tensor forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                 const BlockScratch& s, const RopeTables& rope) const override;
  // From s.d_resid = dL/d(attention(x)), writes dL/dx through the attention to s.d_branch;
  // selective recompute rebuilds the norm output first. Parameter gradients accumulate, or with
  // m.deferred wait for backward_weight().
  void backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m, const BlockScratch& s,
                const RopeTables& rope, Recompute policy) const override;
  void backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                       const BlockScratch& s) const override;
  // attention(x) of the step's new positions x (count, D), the whole layer on one rank: their
  // keys and values join the cache, their queries meet every cached position up to their own
  // (the causal mask). Returns s.branch (count, D).
  Tensor decode(Backend& be, Tensor x, const AttentionDecode& d, const BlockScratch& s) const override;

 private:
  struct Views;
  Views views(const SubLayerMemory& m) const;

  const ModelGeometry& geo_;
  int layer_;
  UnitId unit_;
  int n_heads_, n_kv_heads_, head_dim_;  // this rank's
  float eps_;
  // Which keys each token of the micro-batch attends to: causal, within the model's sliding
  // window, within its document when the micro-batch has document ids. The ring derives each
  // block's mask from it (parallel/ring_attention.h).
  AttentionMask mask(const SubLayerMemory& m) const;
  int ln1_ = -1, q_, k_, v_, o_;
  const ParamRegistry& params_;
};

}  // namespace ustrain
