// The causal attention of whole sequences, as context parallelism's ring issues it at cp = 1:
// one self block of every query row against every key row of qkv (B, S, W) (kernels/backend.h).
#pragma once

#include "kernels/backend.h"

namespace ustrain::test {

inline void whole_attention_forward(Backend& be, Tensor out, Tensor lse, Tensor qkv, int heads, int kv_heads) {
  const SeqRange all{0, qkv.shape[1]};
  be.attention_block_forward(out, lse, qkv, all, Tensor(), all, AttentionMask::causal(), heads, kv_heads);
}

// dqkv overwritten.
inline void whole_attention_backward(Backend& be, Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                                     int heads, int kv_heads) {
  const SeqRange all{0, qkv.shape[1]};
  be.attention_block_backward(dqkv, Tensor(), dout, qkv, all, Tensor(), all, out, lse, AttentionMask::causal(), heads,
                              kv_heads);
}

}  // namespace ustrain::test
