#include "core/model/geometry.h"

#include <algorithm>
#include <string>

#include "kernels/error.h"

namespace ustrain {

ModelGeometry ModelGeometry::of(const ModelSection& m, const ModelSplit& split, std::int64_t seq_len) {
  const int tp = split.tp, tp_rank = split.tp_rank;
  const bool sp = split.sp;
  USTRAIN_ASSERT(tp >= 1 && tp_rank >= 0 && tp_rank < tp, "bad tensor-parallel rank");
  USTRAIN_ASSERT(seq_len >= 0, "bad sequence length");
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
  g.seq = seq_len;
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

std::int64_t ModelGeometry::matmul_params() const {
  const std::int64_t per_layer =
      (n_heads + 2 * n_kv_heads) * head_dim * d_model + d_model * n_heads * head_dim + 3 * d_model * ffn;
  return n_layers * per_layer + vocab * d_model;
}

}  // namespace ustrain
