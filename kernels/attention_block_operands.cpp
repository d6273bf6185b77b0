#include "kernels/attention_block_operands.h"

#include <string>

#include "kernels/error.h"

namespace ustrain {

BlockOperands block_operands(const Tensor& qkv, SeqRange q, const Tensor& kv, SeqRange k, int n_heads,
                             int n_kv_heads) {
  BlockOperands b;
  b.self = kv.empty();
  USTRAIN_ASSERT(qkv.shape.rank() == 3 && (b.self || (kv.shape.rank() == 3 && qkv.shape[0] == kv.shape[0])),
                 "block attention needs qkv (B, Sq, W) and kv (B, Skv, 2 Hkv Dh) or none, got " + qkv.shape.str() +
                     " and " + kv.shape.str());
  USTRAIN_ASSERT(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
                 std::to_string(n_heads) + " query heads do not split into groups of " + std::to_string(n_kv_heads));
  b.batch = qkv.shape[0];
  b.q_seq = qkv.shape[1];
  b.width = qkv.shape[2];
  const std::int64_t slots = n_heads + 2 * n_kv_heads;
  USTRAIN_ASSERT(b.width % slots == 0 && b.width > 0,
                 "qkv width " + std::to_string(b.width) + " is not a multiple of H + 2 Hkv = " + std::to_string(slots));
  b.head_dim = b.width / slots;
  USTRAIN_ASSERT(b.self || kv.shape[2] == 2 * n_kv_heads * b.head_dim,
                 "kv " + kv.shape.str() + " for qkv " + qkv.shape.str());
  b.kv_seq = b.self ? b.q_seq : kv.shape[1];
  check_seq_range(q, b.q_seq, "query");
  check_seq_range(k, b.kv_seq, "key");
  return b;
}

}  // namespace ustrain
