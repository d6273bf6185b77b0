// The key cuDNN attention plans are cached under (cudnn_attention.cpp): a pass over the whole
// causal sequence or over one block of it, and its shape, mask and dtype.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "kernels/cuda/attention/attention_layout.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

enum class Pass : std::uint8_t { forward, backward };

// A shape: the whole causal sequence (q_rows = kv_rows = q_seq = kv_seq), or one block of it.
struct PlanKey {
  bool block;
  std::int64_t batch, q_seq, kv_seq, q_rows, kv_rows, heads, kv_heads, head_dim;
  bool causal;
  std::int64_t window;
  DType act;
  Pass pass;
  auto operator<=>(const PlanKey&) const = default;
};

inline PlanKey whole_key(const AttentionDims& a, DType act, Pass pass) {
  return {false, a.batch, a.seq, a.seq, a.seq, a.seq, a.heads, a.kv_heads, a.head_dim, true, a.window, act, pass};
}

inline PlanKey block_key(const BlockAttentionDims& a, DType act, Pass pass) {
  return {true,       a.batch,    a.q_seq,  a.kv_seq, a.q_rows, a.kv_rows, a.heads,
          a.kv_heads, a.head_dim, a.causal, a.window, act,      pass};
}

inline std::string describe(const PlanKey& k) {
  std::string text = k.block ? "block attention " : "attention ";
  text += k.pass == Pass::forward ? "forward (B=" : "backward (B=";
  text += std::to_string(k.batch);
  if (k.block) {
    text += ", " + std::to_string(k.q_rows) + " of " + std::to_string(k.q_seq) + " query rows against ";
    text += std::to_string(k.kv_rows) + " of " + std::to_string(k.kv_seq) + " key rows, ";
    text += k.causal ? "causal" : "no mask";
  } else {
    text += ", S=" + std::to_string(k.q_seq);
  }
  text += ", H=" + std::to_string(k.heads) + ", Hkv=" + std::to_string(k.kv_heads) + ", Dh=" + std::to_string(k.head_dim);
  if (k.window > 0) text += ", window " + std::to_string(k.window);
  text += ", ";
  text += dtype_name(k.act);
  return text + ")";
}

}  // namespace ustrain::cuda
