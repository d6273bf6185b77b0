// The attention sub-layer of a Llama block: pre-norm, fused q/k/v projection, RoPE, causal
// grouped-query attention and the output projection,
//
//   attention(x) = o_proj(attention(rope(qkv_proj(rmsnorm(x)))))
//
// whose sum with x the block takes. Under tensor parallelism q/k/v are column-parallel over
// this rank's heads (whole GQA groups) and o_proj row-parallel. Under context parallelism
// the rank holds part of every sequence and the attention is a ring (parallel/ring_attention.h).
//
// Sizes are this rank's (core/model/geometry.h): H and Hkv its heads and kv heads, Dh the head
// width, W = (H + 2 Hkv) Dh, and N, R, D as in core/model/sublayer.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/geometry.h"
#include "core/model/layer_parallel.h"
#include "core/model/param_registry.h"
#include "core/model/sublayer.h"
#include "core/recipe/recipe.h"

namespace ustrain {

struct RopeTables {
  Tensor cos, sin;  // (S_max, Dh / 2)
};

// One decode step of the attention (sampling, core/model/kv_cache.h): `count` new positions of
// one sequence after the `past` positions whose keys and values the cache holds.
struct AttentionDecode {
  std::int64_t past = 0, count = 0;
  Tensor kv;                       // (S_max, 2 Hkv Dh): the layer's keys (after RoPE) and values
  RopeTables rope;                 // (count, Dh / 2): the new positions' rows
  std::vector<Tensor> activations;  // what decode_activations() lists, at its size
};

class Attention {
 public:
  // Declares q/k/v/o (global shapes) in `unit` of `params`; declare_norm() follows once every
  // sub-layer of the block has declared its matrices (the order checkpoints list them in).
  Attention(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geometry, ParamRegistry& params);
  void declare_norm(ParamRegistry& params);

  // For micro-batches of at most `max_batch` sequences (core/model/sublayer.h).
  std::vector<ActivationSpec> activations(std::int64_t max_batch, DType compute) const;
  std::vector<ActivationSpec> deferred(std::int64_t max_batch, DType compute) const;
  std::vector<ActivationSpec> workspace(std::int64_t max_batch, DType compute) const;
  // Decoding, never training: the layer's key/value cache for one sequence, and the tensors
  // a decode step of up to S_max positions works in.
  ActivationSpec kv_cache(DType compute) const;
  std::vector<ActivationSpec> decode_activations(DType compute) const;

  // attention(x) for x (R, D), as this rank's rows (R, D): in `out`, or in s.branch (which
  // holds the o_proj output, its partial sums under tensor parallelism).
  Tensor forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                 const BlockScratch& s, const RopeTables& rope) const;
  // From s.d_resid = dL/d(attention(x)), writes dL/dx through the attention to s.d_branch;
  // selective recompute rebuilds the norm output first. Parameter gradients accumulate, or with
  // m.deferred wait for backward_weight().
  void backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m, const BlockScratch& s,
                const RopeTables& rope, Recompute policy) const;
  void backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m, const BlockScratch& s) const;
  // attention(x) of the step's new positions x (count, D), the whole layer on one rank: their
  // keys and values join the cache, their queries meet every cached position up to their own
  // (the causal mask). Returns s.branch (count, D).
  Tensor decode(Backend& be, Tensor x, const AttentionDecode& d, const BlockScratch& s) const;

 private:
  struct Views;
  Views views(const SubLayerMemory& m) const;

  const ModelGeometry& geo_;
  int layer_;
  UnitId unit_;
  int n_heads_, n_kv_heads_, head_dim_;  // this rank's
  float eps_;
  // Which keys each token attends to, chosen once for every micro-batch: causal.
  AttentionMask mask_ = AttentionMask::causal();
  int ln1_ = -1, q_, k_, v_, o_;
  const ParamRegistry& params_;
};

}  // namespace ustrain
