#include "kernels/record/op_scratch.h"

#include <algorithm>
#include <string_view>

#include "kernels/cuda/scratch_sizes.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

constexpr std::size_t kHalfBytes = 2;  // cuDNN stages in bf16 or f16, the dtypes it takes

void expect_args(const RecordedOp& op, std::size_t shapes, std::size_t args) {
  USTRAIN_ASSERT(op.shapes.size() == shapes && op.dtypes.size() == shapes && op.args.size() == args,
                 std::string("recorded ") + op.name + " lacks the shapes or arguments its scratch follows");
}

// attention_block_forward (out, lse, qkv, kv) and attention_block_backward (dq, dkv, dout,
// qkv, kv, out, lse): qkv (B, Sq, W), kv (B, Skv, 2 Hkv Dh) or empty (a self block), args {H,
// Hkv, q.begin, q.count, k.begin, k.count, causal, window, documents}. A causal self block of
// the whole sequence is what cuDNN's whole-sequence graphs take, with its results in the
// activation dtype; a packed block's backward needs the merged out in it. Document ids run our
// kernels; a window goes to cuDNN's windowed graphs (kernels/cuda/attention/cuda_backend_blocks.cpp).
RecordedAttention block_attention(const RecordedOp& op, bool backward) {
  expect_args(op, backward ? 7 : 4, 9);
  const std::size_t qkv_at = backward ? 3 : 2;
  const Shape& qkv = op.shapes[qkv_at];
  const Shape& kv = op.shapes[qkv_at + 1];
  const std::int64_t heads = op.args[0], kv_heads = op.args[1];
  const bool self = kv.rank() == 0;  // an empty tensor's shape
  USTRAIN_ASSERT(qkv.rank() == 3 && (self || kv.rank() == 3) && heads > 0 && kv_heads > 0,
                 std::string("recorded ") + op.name + " on qkv " + qkv.str() + ", kv " + kv.str());
  RecordedAttention a;
  a.block = !self;
  a.backward = backward;
  a.act = op.dtypes[qkv_at];
  const std::int64_t head_dim = qkv[2] / (heads + 2 * kv_heads);
  const bool causal = op.args[6] != 0, documents = op.args[8] != 0;
  // cuDNN's graphs take a window only on the causal diagonal, and as 0 when it spans every row.
  const std::int64_t window = causal && op.args[7] < op.args[3] ? op.args[7] : 0;
  const bool cudnn_mask = !documents && (op.args[7] == 0 || causal);
  if (self) {
    a.whole = {qkv[0], qkv[1], heads, kv_heads, head_dim, window};
    const bool whole = causal && op.args[2] == 0 && op.args[3] == qkv[1] && op.args[4] == 0 && op.args[5] == qkv[1];
    // The forward's out, or the backward's dqkv and out, in the activation dtype.
    const bool act_results = backward ? op.dtypes[0] == a.act && op.dtypes[5] == a.act : op.dtypes[0] == a.act;
    a.cudnn_offered = whole && cudnn_mask && act_results && cuda::cudnn_supports(a.whole, a.act);
    return a;
  }
  a.block_dims = {qkv[0], qkv[1], kv[1], op.args[3], op.args[5], heads, kv_heads, head_dim, causal, window};
  a.cudnn_offered =
      cudnn_mask && cuda::cudnn_block_supports(a.block_dims, a.act) && (!backward || op.dtypes[5] == a.act);
  return a;
}

// Our kernels' scratch for the op, and cuDNN's staging ahead of its plan's workspace.
std::size_t attention_scratch_bytes(const RecordedAttention& a) {
  std::size_t ours = 0, staging = 0;
  if (a.block) {
    const cuda::BlockAttentionDims& d = a.block_dims;
    if (a.backward) ours = cuda::attention_backward_rows_bytes(d.batch, d.heads, d.q_rows);
    if (a.cudnn_offered)
      staging = a.backward ? cuda::block_backward_scratch(d, kHalfBytes).bytes : cuda::block_forward_scratch(d, kHalfBytes).bytes;
  } else {
    const cuda::AttentionDims& d = a.whole;
    if (a.backward) ours = cuda::attention_backward_rows_bytes(d.batch, d.heads, d.seq);
    if (a.cudnn_offered && a.backward) staging = cuda::backward_scratch(d).bytes;
  }
  return std::max(ours, staging);
}

}  // namespace

std::optional<RecordedAttention> recorded_attention(const RecordedOp& op) {
  const std::string_view name = op.name;
  if (name == "attention_block_forward") return block_attention(op, false);
  if (name == "attention_block_backward") return block_attention(op, true);
  return std::nullopt;
}

std::size_t cpu_widening_bytes(const RecordedOp& op) {
  // The ops CpuMixedBackend runs as widen, compute in fp32, round (cpu_mixed_backend.cpp); the
  // rest (copies, conversions, the optimizer) take 16-bit tensors as they are.
  static constexpr std::string_view kWidened[] = {
      "linear_forward", "linear_backward_input", "linear_backward_weight", "embedding_forward",
      "embedding_backward", "embedding_forward_shard", "embedding_backward_shard", "rmsnorm_forward",
      "rmsnorm_backward", "rope_forward", "rope_backward", "attention_kv_pack", "attention_block_forward",
      "attention_block_backward", "attention_grad_pack",
      "moe_route", "moe_route_backward", "moe_combine", "moe_combine_backward", "swiglu_forward",
      "swiglu_backward", "add", "cross_entropy_forward", "cross_entropy_backward", "cross_entropy_shard_stats",
      "cross_entropy_backward_shard"};
  const std::string_view name = op.name;
  if (std::find(std::begin(kWidened), std::end(kWidened), name) == std::end(kWidened)) return 0;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < op.shapes.size(); ++i) {
    if (op.dtypes.at(i) != DType::bf16 && op.dtypes.at(i) != DType::f16) continue;
    const auto wide = static_cast<std::size_t>(op.shapes[i].numel()) * sizeof(float);
    bytes += (wide + kCpuWideningAlign - 1) / kCpuWideningAlign * kCpuWideningAlign;
  }
  return bytes;
}

std::size_t cuda_op_scratch_bytes(const RecordedOp& op) {
  const std::string_view name = op.name;
  if (name == "embedding_backward" || name == "embedding_backward_shard")
    return cuda::embedding_backward_scratch_bytes(op.shapes.at(1).numel());  // (dtable, ids, dout)
  if (name == "rmsnorm_backward") {  // (dx, dweight, dout, x, weight, rstd)
    const Shape& x = op.shapes.at(3);
    return cuda::rmsnorm_backward_scratch_bytes(x.rows(), x.last());
  }
  if (name == "sum_of_squares") return cuda::sum_of_squares_scratch_bytes();
  if (const std::optional<RecordedAttention> a = recorded_attention(op)) return attention_scratch_bytes(*a);
  return 0;
}

}  // namespace ustrain
