#include "core/model/geometry.h"

#include <algorithm>
#include <string>

#include "kernels/error.h"

namespace ustrain {

ModelGeometry ModelGeometry::of(const ModelSection& m, int tp, int tp_rank, bool sp) {
  USTRAIN_ASSERT(tp >= 1 && tp_rank >= 0 && tp_rank < tp, "bad tensor-parallel rank");
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
  return g;
}

}  // namespace ustrain
