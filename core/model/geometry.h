// The model's sizes, global and on this rank, computed once from the recipe's model section
// and the layout. Everything that needs a head count, a width, a vocabulary size or the layers
// of a pipeline stage reads it here; nothing else divides by tp or pp.
//
// Tensor parallelism splits attention by heads (query and key/value heads alike, so each
// rank keeps whole GQA groups), the MLP by its hidden width, and the vocabulary of the
// embedding and output head by rows. A vocabulary that does not divide by tp is padded at
// the end to a multiple of it; the padding rows exist only in memory (zero, masked out of
// the loss), never in checkpoints or exports. Under sequence parallelism the residual
// stream, norms and residual adds hold 1/tp of the token rows.
//
// Activations are planned for sequences of `seq` tokens on this rank: the recipe's
// train.seq_len, divided by cp under context parallelism, whose zig-zag split
// (parallel/ring_attention.h) gives each rank two runs of every sequence: `positions` says
// which, for the RoPE tables.
//
// Pipeline parallelism cuts the layers into pp * V virtual stages of equal size; this rank
// holds the stages pp_rank, pp_rank + pp, ... (its chunks, parallel/pipeline_schedule.h). The
// first stage also holds the embedding, the last the final norm and the output head (and,
// with tied embeddings, a copy of the embedding that the first stage owns).
#pragma once

#include <cstdint>
#include <vector>

#include "core/recipe/recipe.h"
#include "parallel/context_split.h"

namespace ustrain {

// How the model is split over the ranks that hold one replica of it.
struct ModelSplit {
  int tp = 1, tp_rank = 0;
  bool sp = false;
  int pp = 1, pp_rank = 0, virtual_stages = 1;
  int cp = 1, cp_rank = 0;
  // Expert parallelism: each MoE layer's experts in ep blocks, this rank's is ep_rank's.
  int ep = 1, ep_rank = 0;
  double ep_capacity_factor = 2.0;  // parallel.ep_capacity_factor
};

// The part of the model one chunk runs: layers [first_layer, end_layer) of stage `stage`.
struct ChunkSpan {
  int stage = 0;
  int first_layer = 0, end_layer = 0;
  bool embedding = false;  // the first stage
  bool head = false;       // the last stage: final norm, output head and loss
};

struct ModelGeometry {
  // The whole model.
  std::int64_t vocab = 0, d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn = 0;
  bool tied_embeddings = false;  // the output head is the embedding matrix
  std::int64_t sliding_window = 0;  // keys each query attends to, itself included (0: every earlier one)

  // Tensor (and sequence) parallelism.
  int tp = 1, tp_rank = 0;
  bool sp = false;  // sequence parallelism (only meaningful with tp > 1)

  // On this rank.
  std::int64_t heads = 0, kv_heads = 0;  // attention heads
  std::int64_t ffn_local = 0;            // MLP hidden width
  std::int64_t vocab_padded = 0;         // the vocabulary padded to a multiple of tp
  std::int64_t vocab_local = 0;          // rows of the embedding and head: vocab_padded / tp
  std::int64_t vocab_begin = 0;          // the first vocabulary row of this rank
  std::int64_t vocab_valid = 0;          // real rows among vocab_local (the rest is padding)
  std::int64_t seq = 0;                  // tokens of each sequence, at most (0: sizes only)
  // Document masking (train.document_mask, which whoever builds a geometry from a recipe
  // copies here): micro-batches carry their tokens' document ids, which attention honours.
  bool documents = false;

  // Context parallelism: this rank's share of every sequence (global positions).
  ContextSplit context{};
  std::array<SeqRange, 2> positions() const { return context.runs(seq * context.size); }

  // Mixture of experts (0 experts: every MLP dense). Widths of the whole model: expert_ffn of
  // one routed expert, shared_ffn of all shared experts together; *_local this rank's share.
  std::int64_t n_experts = 0, top_k = 0, expert_ffn = 0, shared_ffn = 0;
  std::int64_t expert_ffn_local = 0, shared_ffn_local = 0;
  int first_dense_layers = 0, moe_interval = 1;
  // Expert parallelism: this rank holds experts [experts_first, experts_first + experts_local)
  // of every MoE layer (all of them at ep = 1) and runs them on the rows its ep group routes
  // there (parallel/expert_dispatch.h).
  int ep = 1, ep_rank = 0;
  std::int64_t experts_first = 0, experts_local = 0;
  double ep_capacity_factor = 2.0;
  // Rows this rank receives per dispatch round for micro-batches of `batch` sequences: the
  // capacity factor times the rows it routes itself (tokens x top_k), at least one.
  std::int64_t dispatch_capacity(std::int64_t batch) const;
  // Whether layer `layer`'s MLP is a mixture of experts.
  bool moe_layer(int layer) const {
    return n_experts > 0 && layer >= first_dense_layers && (layer - first_dense_layers) % moe_interval == 0;
  }

  // Pipeline parallelism.
  int pp = 1, pp_rank = 0, virtual_stages = 1;
  std::vector<ChunkSpan> chunks;  // this rank's, in chunk order

  // Width of the fused q/k/v projection output.
  template <class N = std::int64_t>
  N qkv_width() const {
    return (static_cast<N>(heads) + 2 * static_cast<N>(kv_heads)) * static_cast<N>(head_dim);
  }
  // Token rows of a micro-batch of `batch` sequences of `seq` tokens.
  std::int64_t tokens(std::int64_t batch) const { return batch * seq; }
  // Rows of the residual stream this rank holds for `tokens` token rows.
  std::int64_t rows(std::int64_t tokens) const { return sp && tp > 1 ? tokens / tp : tokens; }
  bool sequence_parallel() const { return sp && tp > 1; }

  // The one count of the model's parameters, of the whole model (every tensor-parallel rank's
  // part together, without the vocabulary's padding), in the arithmetic N: 64-bit integers,
  // or long double for a recipe's numbers before they are known to fit
  // (core/memory/model_size.h).
  //
  // Of transformer block `layer`: q, k, v and o, the MLP's matrices (gate, up and down; of an
  // MoE layer the router's and every expert's), and the two norms.
  template <class N = std::int64_t>
  N block_params(int layer) const;
  // Parameters that take part in a token's matrix multiplies (the output head included, tied or
  // not; the embedding lookup not; of an MoE layer the router, the top-k experts and the
  // shared ones: the active parameters): the N of DESIGN.md's FLOPs convention.
  template <class N = std::int64_t>
  N matmul_params() const;
  // Every parameter: the embedding, the blocks, the final norm and an untied output head.
  template <class N = std::int64_t>
  N total_params() const;
  // What this pipeline rank's chunks hold: their blocks, the embedding on the first stage, the
  // final norm and the output head on the last (with tied embeddings, the last stage's copy
  // of the embedding when the first stage is another rank's); of an MoE layer the experts of
  // this rank's ep block.
  template <class N = std::int64_t>
  N held_params() const;

  // Asserts what the recipe check guarantees: heads, kv heads and ffn divide by tp, the
  // layers by pp * virtual_stages. `seq_len` is the recipe's sequence length (0: sizes only).
  static ModelGeometry of(const ModelSection& model, const ModelSplit& split = {}, std::int64_t seq_len = 0);
};

}  // namespace ustrain
