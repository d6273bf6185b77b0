// A model chunk: the layers [a, b) of one pipeline stage (with the embedding on the first
// stage and the final norm, output head and loss on the last), run one micro-batch at a time
// on numbered activation slots, so that a pipeline schedule can keep several micro-batches in
// flight. A chunk's parameters are in the rank's registry; its hooks announce their use.
//
// A micro-batch's slot holds what its backward needs: the residual stream entering and
// leaving each layer, the layers' activations as the recompute policy keeps them, its tokens,
// the loss statistics and, when the schedule splits the backward, the gradients its weight
// pass needs (the per-token losses go where the caller says). Scratch (recomputed activations,
// gradient workspace, sequence-parallel buffers, the logits) is shared by all slots and chunks
// of the rank: the rank runs one action at a time.
//
// Sizes are this rank's (core/model/geometry.h): N = B * S token rows, R of them in the
// residual stream (N / tp under sequence parallelism), D = d_model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/memory/memory_plan.h"
#include "core/model/geometry.h"
#include "core/model/kv_cache.h"
#include "core/model/layer_parallel.h"
#include "core/model/param_hooks.h"
#include "kernels/token_batch.h"
#include "core/model/param_registry.h"
#include "core/model/recompute.h"
#include "core/model/transformer_block.h"

namespace ustrain {

// Handles of the parameters outside the blocks, declared by the model.
struct ChunkParams {
  int embed = -1;       // the embedding (first stage)
  int final_norm = -1;  // last stage
  int head = -1;        // last stage: lm_head, or the (copy of the) embedding when tied
};

// Scratch the chunks of one rank share, planned once by the model for its largest
// micro-batch (rows first; chunks take the rows a micro-batch needs).
struct SharedScratch {
  BlockScratch block;                  // (R, D) and (N, D) rows, core/model/sublayer.h
  std::vector<Tensor> attention;                     // the attention's workspace list
  std::map<std::string, std::vector<Tensor>> mlp;   // each MLP kind's (Mlp::kind())
};

class ModelChunk {
 public:
  // `hooks` is the model's hooks pointer, read at each call (it may be set later). `loads`:
  // per block, where its mixture of experts records its routing statistics (the model's;
  // null for other MLP kinds).
  ModelChunk(const ModelSection& cfg, const ModelGeometry& geometry, const ChunkSpan& span,
             std::vector<const TransformerBlock*> blocks, std::vector<MoeLoad*> loads, ChunkParams params,
             const ParamRegistry& param_set, LayerParallel par, Recompute policy, DType compute,
             ParamUseHooks* const& hooks);

  const ChunkSpan& span() const { return span_; }
  int slots() const { return static_cast<int>(slots_.size()); }

  // Plans `slots` micro-batch slots of at most `max_batch` sequences of the geometry's length
  // and `receive_buffers` buffers for activations or gradients received ahead of use;
  // `split_backward` keeps the gradients a later weight pass needs. The layers' tensors are
  // what their sub-layers list (core/model/sublayer.h).
  void plan(MemoryPlan& plan, std::int64_t max_batch, int slots, int receive_buffers, bool split_backward);
  void bind(const PlannedMemory& mem, const SharedScratch& scratch, const RopeTables& rope);

  // Where boundary data lives, as (R, D) views for a micro-batch of (B, S).
  Tensor output(int slot) const;         // the residual leaving the chunk (not on the last stage)
  Tensor input_grad(int slot) const;     // dL/d(input), after the backward (not on the first stage)
  Tensor receive_buffer(int i, std::int64_t batch, std::int64_t seq) const;
  int receive_buffers() const { return static_cast<int>(receive_.size()); }

  // Forward of a micro-batch of (B, S) tokens into `slot`: `input` (R, D) is the residual
  // stream entering the chunk (empty on the first stage, which embeds the tokens' ids); their
  // targets are read on the last stage, which writes the per-token losses into `losses` (N,
  // fp32, on the device: the caller reads them when it needs them). The stages that read
  // `tokens` use their first B S entries; every stage copies their document ids, if any, once
  // for all its layers (a model planned for them: the geometry's documents).
  void forward(Backend& be, int slot, std::int64_t batch, std::int64_t seq, const TokenBatch& tokens, Tensor input,
               Tensor losses);
  // The backward of the slot's micro-batch: `grad` (R, D) is dL/d(output) (empty on the last
  // stage, which starts from the loss with dL/d(loss_i) = dloss). Leaves dL/d(input) in
  // input_grad(slot). With `weights` the weight gradients are computed too; otherwise they
  // wait for backward_weight() (split_backward only).
  void backward(Backend& be, int slot, Tensor grad, float dloss, bool weights = true);
  void backward_weight(Backend& be, int slot);

  // Decoding (LlamaModel::decode), the whole model in one chunk on one rank: the forward of
  // `count` new tokens of the cache's sequence; returns the last one's logits (1, Vs).
  Tensor decode(Backend& be, KvCache& cache, const std::int32_t* ids, std::int64_t count) const;

  // The logits of the last forward, (N, Vs) (last stage).
  Tensor logits() const { return logits_of_; }

 private:
  // A layer's planned tensors in one slot, in the order its sub-layers list them.
  struct LayerHandles {
    std::vector<int> attention, mlp;  // activations (per layer, or the chunk's shared scratch)
    int x_mid = -1;
    std::vector<int> attention_deferred, mlp_deferred;  // split backward only
  };
  struct Slot {
    std::vector<int> resid;                 // layers + 1 entries (R, D)
    std::vector<LayerHandles> layers;
    int ids = -1, targets = -1;             // (N) first / last stage
    int documents = -1;                     // (N cp) document ids of whole windows, every stage
    bool has_documents = false;             // the micro-batch it holds came with document ids
    int final_rstd = -1, final_out = -1, ce_lse = -1;  // last stage
    int input_grad = -1;                    // (R, D), not on the first stage
    std::int64_t batch = 0, seq = 0;        // of the micro-batch it holds
    std::vector<RoutedTokens> routed;         // per layer: what its MLP routed (SubLayerMemory::routed)
  };

  Tensor rows(int handle, std::int64_t n) const;
  std::vector<Tensor> tensors(const std::vector<int>& handles) const;
  // Layer `layer`'s memory in slot `s`; with `deferred`, the tensors of its weight pass too.
  BlockMemory layer_memory(Slot& s, int layer, bool deferred) const;
  // Every unit of block l's parameters: acquired before it runs, released after, in reverse.
  void acquire_block(std::size_t l, bool backward) const;
  void release_block(std::size_t l) const;
  BlockScratch scratch_rows(std::int64_t batch, std::int64_t seq) const;
  void head_backward(Backend& be, int slot, float dloss, const BlockScratch& g);
  void acquire(UnitId unit, bool backward) const { if (hooks_) hooks_->acquire(unit, backward); }
  void release(UnitId unit) const { if (hooks_) hooks_->release(unit); }
  void grads_done(UnitId unit) const { if (hooks_) hooks_->grads_done(unit); }

  const ModelSection& cfg_;
  const ModelGeometry& geo_;
  ChunkSpan span_;
  std::vector<const TransformerBlock*> blocks_;
  std::vector<MoeLoad*> loads_;  // per block
  ChunkParams p_;
  const ParamRegistry& params_;
  LayerParallel par_;   // what the layers see of the parallelisation
  TensorParallel& tp_;  // par_.tp, for the vocabulary-parallel embedding, head and loss
  Recompute policy_;
  DType compute_;
  bool split_ = false;

  std::vector<Slot> slots_;
  std::vector<int> receive_;
  int logits_ = -1, ce_parts_ = -1;
  const PlannedMemory* mem_ = nullptr;
  SharedScratch scratch_;
  RopeTables rope_;
  ParamUseHooks* const& hooks_;
  // The logits buffer is shared by the slots: it holds the logits of `logits_slot_` until
  // another forward or a backward overwrites them; a backward of another slot recomputes them.
  Tensor logits_of_;
  int logits_slot_ = -1;
};

}  // namespace ustrain
