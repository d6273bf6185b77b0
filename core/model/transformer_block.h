// One Llama decoder block: an attention and an MLP sub-layer, each around a residual add.
//
//   x_mid = x_in  + attention(x_in)    (core/model/attention.h)
//   x_out = x_mid + mlp(x_mid)         (core/model/mlp.h: dense, or a mixture of experts)
//
// The block owns no memory: the model plans what its sub-layers list (core/model/sublayer.h)
// and x_mid, and hands them in as views; the recompute policy decides which persist per layer
// and which are shared scratch. How the layer is parallelised reaches it only as the
// LayerParallel context it passes on (core/model/layer_parallel.h). Sizes as in
// core/model/sublayer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/model/attention.h"
#include "core/recipe/geometry.h"
#include "core/model/mlp.h"
#include "core/model/param_registry.h"
#include "core/model/recompute.h"
#include "core/recipe/recipe.h"

namespace ustrain {

// What the block holds of one micro-batch.
struct BlockMemory {
  SubLayerMemory attention, mlp;
  Tensor x_mid;  // (R, D), kept unless recompute is full
};

// What the block works on in one decode step (sampling, core/model/kv_cache.h) of
// `attention.count` new positions.
struct BlockDecode {
  AttentionDecode attention;
  SubLayerMemory mlp;  // the MLP's activations and workspace for (1, count) tokens
  Tensor x_mid;        // (count, D)
};

class TransformerBlock {
 public:
  // Declares the block's parameters (global shapes) in `unit` of `params`.
  TransformerBlock(int layer, UnitId unit, const ModelSection& cfg, const ModelGeometry& geometry, ParamRegistry& params);

  const Attention& attention() const { return *attention_; }
  const Mlp& mlp() const { return *mlp_; }
  Mlp& mlp() { return *mlp_; }
  // x_mid for micro-batches of at most `max_batch` sequences: planned between the attention's
  // activations and the MLP's.
  ActivationSpec x_mid(std::int64_t max_batch, DType compute) const;

  // x_in, x_out (R, D).
  void forward(Backend& be, const LayerParallel& par, Tensor x_in, Tensor x_out, const BlockMemory& m,
               const BlockScratch& s, const RopeTables& rope) const;
  // On entry s.d_resid holds dL/dx_out; on return dL/dx_in. Parameter gradients accumulate;
  // with deferred tensors in `m`, the GEMMs' weight gradients are left for backward_weight(),
  // their output gradients kept there (needs every activation kept: Recompute::none).
  void backward(Backend& be, const LayerParallel& par, Tensor x_in, const BlockMemory& m, const BlockScratch& s,
                const RopeTables& rope, Recompute policy) const;
  // The GEMMs' weight gradients left by a backward with deferred tensors.
  void backward_weight(Backend& be, const LayerParallel& par, const BlockMemory& m, const BlockScratch& s) const;
  // Decoding, never training: the forward of a step's new positions x_in, x_out (count, D),
  // the whole layer on one rank, against the keys and values the cache holds (and adding theirs).
  void decode(Backend& be, const LayerParallel& par, Tensor x_in, Tensor x_out, const BlockDecode& m,
              const BlockScratch& s) const;

  UnitId unit() const { return unit_; }
  // Every unit of the block's parameters: its own, then its MLP's own (a mixture of experts'
  // routed experts, core/model/moe_mlp.h).
  std::vector<UnitId> units() const;

 private:
  UnitId unit_;
  const ModelGeometry& geo_;
  std::unique_ptr<Attention> attention_;
  std::unique_ptr<Mlp> mlp_;
};

}  // namespace ustrain
