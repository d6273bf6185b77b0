// The attention sub-layer of a block, whatever its kind: grouped-query causal self-attention
// (core/model/grouped_query_attention.h) today; another kind (another mask, another way to
// compute its keys) is another class. Like the MLP kinds (core/model/mlp.h), a kind declares
// its parameters, lists the tensors it needs planned (core/model/sublayer.h) and runs its
// passes on them:
//
//   x_mid = x_in + attention(x_in)
//
// with the residual add left to the block. Under context parallelism the rank holds part of
// every sequence, and the kind computes its attention through the ring
// (parallel/ring_attention.h), which it finds in the LayerParallel context. Sizes as in
// core/model/sublayer.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/layer_parallel.h"
#include "core/model/param_registry.h"
#include "core/model/sublayer.h"

namespace ustrain {

struct RopeTables {
  Tensor cos, sin;  // (S_max, Dh / 2)
};

// One decode step of the attention (sampling, core/model/kv_cache.h): `count` new positions of
// one sequence after the `past` rows whose keys and values the cache holds, row 0 being
// position `first`; with a sliding window `window` the new positions attend within it.
struct AttentionDecode {
  std::int64_t past = 0, count = 0;
  Tensor kv;                       // (rows, 2 Hkv Dh): the layer's keys (after RoPE) and values
  RopeTables rope;                 // (count, Dh / 2): the new positions' rows
  std::vector<Tensor> activations;  // what decode_activations() lists, at its size
  std::int64_t first = 0, window = 0;
};

class Attention {
 public:
  virtual ~Attention() = default;

  // A kind declares its matrices when made; its norm gain here, once every sub-layer of the
  // block has declared its matrices (the order checkpoints list them in).
  virtual void declare_norm(ParamRegistry& params) = 0;

  // For micro-batches of at most `max_batch` sequences (core/model/sublayer.h).
  virtual std::vector<ActivationSpec> activations(std::int64_t max_batch, DType compute) const = 0;
  virtual std::vector<ActivationSpec> deferred(std::int64_t max_batch, DType compute) const = 0;
  virtual std::vector<ActivationSpec> workspace(std::int64_t max_batch, DType compute) const = 0;
  // Decoding, never training: the layer's key/value cache for one sequence, and the tensors
  // a decode step of up to S_max positions works in.
  virtual ActivationSpec kv_cache(DType compute) const = 0;
  virtual std::vector<ActivationSpec> decode_activations(DType compute) const = 0;

  // attention(x) for x (R, D), as this rank's rows (R, D): in `out`, or in s.branch.
  virtual Tensor forward(Backend& be, const LayerParallel& par, Tensor x, Tensor out, const SubLayerMemory& m,
                         const BlockScratch& s, const RopeTables& rope) const = 0;
  // From s.d_resid = dL/d(attention(x)), writes dL/dx through the attention to s.d_branch;
  // selective recompute rebuilds the cheap activations first. Parameter gradients accumulate,
  // or with m.deferred wait for backward_weight().
  virtual void backward(Backend& be, const LayerParallel& par, Tensor x, const SubLayerMemory& m,
                        const BlockScratch& s, const RopeTables& rope, Recompute policy) const = 0;
  virtual void backward_weight(Backend& be, const LayerParallel& par, const SubLayerMemory& m,
                               const BlockScratch& s) const = 0;
  // attention(x) of a decode step's new positions x (count, D), the whole layer on one rank:
  // their keys and values join the cache. Returns s.branch (count, D).
  virtual Tensor decode(Backend& be, Tensor x, const AttentionDecode& d, const BlockScratch& s) const = 0;
};

}  // namespace ustrain
