// The shapes of an attention block's operands (Backend::attention_block_forward and _backward),
// checked once for every backend.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace ustrain {

struct BlockOperands {
  std::int64_t batch = 0, q_seq = 0, kv_seq = 0;
  std::int64_t width = 0;     // qkv's row: (H + 2 Hkv) Dh
  std::int64_t head_dim = 0;
  bool self = false;          // no kv: the keys are qkv's own rows
};

// The sizes of qkv (B, Sq, W) and kv (B, Skv, 2 Hkv Dh) or none, after asserting that they
// agree with each other and with the head counts, and that rows q and k lie in their sequences.
BlockOperands block_operands(const Tensor& qkv, SeqRange q, const Tensor& kv, SeqRange k, int n_heads,
                             int n_kv_heads);

}  // namespace ustrain
