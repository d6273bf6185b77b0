#include "core/model/geometry.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/error.h"

namespace ustrain {

ModelGeometry ModelGeometry::of(const ModelSection& m, const ModelSplit& split, std::int64_t seq_len) {
  const int tp = split.tp, tp_rank = split.tp_rank;
  const bool sp = split.sp;
  USTRAIN_ASSERT(tp >= 1 && tp_rank >= 0 && tp_rank < tp, "bad tensor-parallel rank");
  USTRAIN_ASSERT(seq_len >= 0, "bad sequence length");
  USTRAIN_ASSERT(split.cp >= 1 && split.cp_rank >= 0 && split.cp_rank < split.cp, "bad context-parallel rank");
  USTRAIN_ASSERT(split.cp == 1 || seq_len % (2 * split.cp) == 0,
                 "seq_len must split into 2 cp chunks (the recipe check refuses other layouts)");
  USTRAIN_ASSERT(split.pp >= 1 && split.pp_rank >= 0 && split.pp_rank < split.pp && split.virtual_stages >= 1,
                 "bad pipeline rank");
  const std::int64_t stages = static_cast<std::int64_t>(split.pp) * split.virtual_stages;
  USTRAIN_ASSERT(m.n_layers % stages == 0, "n_layers = " + std::to_string(m.n_layers) + " must divide into " +
                                               std::to_string(stages) + " stages (the recipe check refuses it)");
  USTRAIN_ASSERT(m.n_heads % tp == 0 && m.n_kv_heads % tp == 0 && m.ffn_hidden % tp == 0,
                 "heads, kv heads and ffn_hidden must divide by tp = " + std::to_string(tp) +
                     " (the recipe check refuses other layouts)");
  ModelGeometry g;
  g.vocab = m.vocab_size;
  g.d_model = m.d_model;
  g.n_layers = m.n_layers;
  g.n_heads = m.n_heads;
  g.n_kv_heads = m.n_kv_heads;
  g.head_dim = m.d_model / m.n_heads;
  g.ffn = m.ffn_hidden;
  g.tied_embeddings = m.tied_embeddings;
  g.sliding_window = m.sliding_window;
  g.tp = tp;
  g.tp_rank = tp_rank;
  g.sp = sp;
  g.heads = m.n_heads / tp;
  g.kv_heads = m.n_kv_heads / tp;
  g.ffn_local = m.ffn_hidden / tp;
  g.vocab_padded = (m.vocab_size + tp - 1) / tp * tp;
  g.vocab_local = g.vocab_padded / tp;
  g.vocab_begin = g.vocab_local * tp_rank;
  g.vocab_valid = std::clamp<std::int64_t>(m.vocab_size - g.vocab_begin, 0, g.vocab_local);
  if (m.n_experts > 0) {
    g.n_experts = m.n_experts;
    g.top_k = m.experts_per_token;
    g.expert_ffn = m.expert_ffn_hidden > 0 ? m.expert_ffn_hidden : m.ffn_hidden;
    g.shared_ffn = m.n_shared_experts * (m.shared_expert_ffn_hidden > 0 ? m.shared_expert_ffn_hidden : g.expert_ffn);
    USTRAIN_ASSERT(g.expert_ffn % tp == 0 && g.shared_ffn % tp == 0,
                   "expert widths must divide by tp (the recipe check refuses other layouts)");
    g.expert_ffn_local = g.expert_ffn / tp;
    g.shared_ffn_local = g.shared_ffn / tp;
    USTRAIN_ASSERT(split.ep >= 1 && split.ep_rank >= 0 && split.ep_rank < split.ep && m.n_experts % split.ep == 0,
                   "the experts must split over the ep ranks (the recipe check refuses other layouts)");
    g.ep = split.ep;
    g.ep_rank = split.ep_rank;
    g.experts_local = m.n_experts / split.ep;
    g.experts_first = g.experts_local * split.ep_rank;
    g.ep_capacity_factor = split.ep_capacity_factor;
    g.first_dense_layers = static_cast<int>(m.first_dense_layers);
    g.moe_interval = static_cast<int>(m.moe_layer_interval);
  }
  g.seq = seq_len / split.cp;
  g.context = ContextSplit{split.cp, split.cp_rank};
  g.pp = split.pp;
  g.pp_rank = split.pp_rank;
  g.virtual_stages = split.virtual_stages;
  const auto per_stage = static_cast<int>(m.n_layers / stages);
  for (int c = 0; c < split.virtual_stages; ++c) {
    const int stage = c * split.pp + split.pp_rank;
    g.chunks.push_back({stage, stage * per_stage, (stage + 1) * per_stage, stage == 0, stage == stages - 1});
  }
  return g;
}

std::int64_t ModelGeometry::dispatch_capacity(std::int64_t batch) const {
  const auto rows = static_cast<double>(tokens(batch) * top_k);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(ep_capacity_factor * rows)));
}

namespace {

// Which experts of an MoE layer a count takes.
enum class Experts { all, active, held };

// q and o (d x attention width each), k and v (d x kv width each), and the MLP of block
// `layer`: gate, up and down (d x ffn each), or of an MoE layer the router (experts x d), the
// experts' gate, up and down (d x expert_ffn each; all of them, the top-k a token uses, or the
// ones this rank's ep block holds) and the shared experts' (d x shared_ffn each).
template <class N>
N block_matmul_params(const ModelGeometry& g, int layer, Experts which) {
  const N d = static_cast<N>(g.d_model), head_dim = static_cast<N>(g.head_dim);
  const N attention = static_cast<N>(g.n_heads) * head_dim, kv = static_cast<N>(g.n_kv_heads) * head_dim;
  const N attn = 2 * d * attention + 2 * kv * d;
  if (!g.moe_layer(layer)) return attn + 3 * static_cast<N>(g.ffn) * d;
  const N experts = static_cast<N>(which == Experts::active ? g.top_k
                                   : which == Experts::held ? g.experts_local
                                                            : g.n_experts);
  return attn + static_cast<N>(g.n_experts) * d + experts * 3 * static_cast<N>(g.expert_ffn) * d +
         3 * static_cast<N>(g.shared_ffn) * d;
}

}  // namespace

template <class N>
N ModelGeometry::block_params(int layer) const {
  return block_matmul_params<N>(*this, layer, Experts::all) + 2 * static_cast<N>(d_model);
}

template <class N>
N ModelGeometry::matmul_params() const {
  N blocks = 0;
  for (int l = 0; l < n_layers; ++l) blocks += block_matmul_params<N>(*this, l, Experts::active);
  return blocks + static_cast<N>(vocab) * static_cast<N>(d_model);
}

template <class N>
N ModelGeometry::total_params() const {
  const N d = static_cast<N>(d_model);
  N blocks = 0;
  for (int l = 0; l < n_layers; ++l) blocks += block_params<N>(l);
  return static_cast<N>(vocab) * d * (tied_embeddings ? 1 : 2) + d + blocks;
}

template <class N>
N ModelGeometry::held_params() const {
  bool first = false, last = false;
  N blocks = 0;
  for (const ChunkSpan& c : chunks) {
    first |= c.embedding;
    last |= c.head;
    for (int l = c.first_layer; l < c.end_layer; ++l)
      blocks += block_matmul_params<N>(*this, l, Experts::held) + 2 * static_cast<N>(d_model);
  }
  // The embedding on the first stage; on the last an untied head or a tied embedding's copy.
  const int matrices = (first ? 1 : 0) + (last && !(tied_embeddings && first) ? 1 : 0);
  const N d = static_cast<N>(d_model);
  return static_cast<N>(vocab) * d * matrices + (last ? d : 0) + blocks;
}

template std::int64_t ModelGeometry::block_params<std::int64_t>(int) const;
template std::int64_t ModelGeometry::matmul_params<std::int64_t>() const;
template std::int64_t ModelGeometry::total_params<std::int64_t>() const;
template std::int64_t ModelGeometry::held_params<std::int64_t>() const;
template long double ModelGeometry::block_params<long double>(int) const;
template long double ModelGeometry::matmul_params<long double>() const;
template long double ModelGeometry::total_params<long double>() const;
template long double ModelGeometry::held_params<long double>() const;

}  // namespace ustrain
