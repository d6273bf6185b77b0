// What the block's sub-layers (attention, core/model/attention.h; an MLP kind, core/model/
// mlp.h) have in common: the tensors they ask the model to plan, and how they receive them.
//
// A sub-layer lists three kinds of tensors, each at its size for the largest micro-batch:
//   activations  what its backward reads, kept per layer and micro-batch slot unless the
//                recompute policy drops them (then one scratch copy serves every layer and
//                slot of a chunk, and the backward recomputes them);
//   deferred     what a split backward keeps per layer and slot for the later weight pass
//                (the gradients of its GEMM outputs);
//   workspace    gradient scratch shared by every layer of the rank.
// The model plans the lists in their order and hands the planned tensors back in it
// (SubLayerMemory); only the sub-layer knows what each one holds.
//
// Sizes as in core/model/geometry.h: N = B * S token rows, R of them in the residual stream
// (N / tp under sequence parallelism), D = d_model.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/recompute.h"
#include "core/recipe/recipe.h"
#include "kernels/backend.h"

namespace ustrain {

struct ActivationSpec {
  std::string name;  // the plan entry's last part: layers.<l>.<name>, scratch.<name>
  Shape shape;
  DType dtype;
  bool cheap = false;  // cheap to recompute and memory-heavy: selective recompute drops it too

  // Whether `policy` keeps it per layer; full recompute keeps only the block's input.
  bool kept(Recompute policy) const {
    return policy == Recompute::none || (policy == Recompute::selective && !cheap);
  }
};

struct RoutedTokens;  // core/model/mlp.h

// A sub-layer's planned tensors for one micro-batch of (batch, seq) tokens, each list in the
// sub-layer's order and at its planned size (the sub-layer takes the rows it needs).
struct SubLayerMemory {
  std::int64_t batch = 0, seq = 0;
  std::vector<Tensor> activations;
  std::vector<Tensor> deferred;  // empty unless the weight gradients wait for the weight pass
  std::vector<Tensor> workspace;
  // The host record of what a mixture of experts routed in the micro-batch (its caller's, one
  // per layer and slot; other kinds leave it alone); null when decoding.
  RoutedTokens* routed = nullptr;
  // The document of each position of the micro-batch's whole windows, (B, S cp) i32 on the
  // device, one tensor every layer shares (document masking, core/model/geometry.h); empty: one
  // document per sequence.
  Tensor documents;
};

// A planned tensor of a sub-layer's list by its spec's name: `names` lists the specs' names
// in the list's order. Empty when the list has no such entry (an optional tensor).
Tensor planned(const std::vector<std::string>& names, const std::vector<Tensor>& tensors, std::string_view name);
std::vector<std::string> names_of(const std::vector<ActivationSpec>& specs);

// Scratch of the residual stream shared by both sub-layers, sized for the micro-batch.
struct BlockScratch {
  Tensor d_resid;   // (R, D) running gradient of the residual stream
  Tensor d_branch;  // (R, D) a sub-layer's gradient of its input
  Tensor d_norm;    // (R, D)
  Tensor branch;    // (N, D) a sub-layer's output projection (partial sums under tensor parallelism)
  // Sequence parallelism only (empty otherwise): full rows (N, D) of gathered activations,
  // and of gathered gradients or partial input gradients.
  Tensor gathered, d_full;
  // In backward: dL/d(each token's loss), by which per-token auxiliary losses (an MoE
  // router's z-loss) scale their gradients as the cross-entropy's are scaled.
  float loss_grad = 0;
};

// The Hugging Face name prefix of layer `layer`'s parameters.
inline std::string layer_prefix(int layer) { return "model.layers." + std::to_string(layer) + "."; }

// Initialisation of the projections that write into the residual stream: scaled by depth so
// the residual stream's variance stays bounded as layers are added (the GPT-2 / Megatron
// convention).
inline double residual_init_std(const ModelSection& cfg) {
  return cfg.init_std / std::sqrt(2.0 * static_cast<double>(cfg.n_layers));
}

// The first n rows of `t` (all of a vector's first n elements); empty stays empty.
inline Tensor first_rows(const Tensor& t, std::int64_t n) {
  if (t.empty()) return t;
  if (t.shape.rank() == 1) return Tensor(t.data, Shape{n}, t.dtype, t.device);
  return Tensor(t.data, Shape{n, t.shape.last()}, t.dtype, t.device);
}

}  // namespace ustrain
