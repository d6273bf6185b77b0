// Where causal GQA attention (and attention over blocks of the sequence, below) finds its
// operands when cuDNN runs it: 4-D (b, h, s, d) views with explicit strides straight into the
// fused buffers, so nothing is copied or transposed.
//
//   qkv, dqkv (B, S, W), W = (H + 2 Hkv) Dh: each token row is [q heads | k heads | v heads]
//   out, dout (B, S, H Dh)
//   lse       (B, H, S) fp32, log(sum_j exp(scale * q_i.k_j)) over j <= i
//
// Pure C++ (no CUDA), so the arithmetic is unit-tested on any machine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/tensor.h"

namespace ustrain::cuda {

struct AttentionDims {
  std::int64_t batch = 0, seq = 0;
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t window = 0;  // a sliding window on the causal mask: query i sees keys i - j < window; 0 = none

  std::int64_t qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::int64_t out_width() const { return heads * head_dim; }
};

// A strided 4-D view of a buffer: element (i0, i1, i2, i3) is at
// offset + i0 * strides[0] + ... + i3 * strides[3] elements from the buffer's start.
struct StridedView {
  std::array<std::int64_t, 4> dims{};
  std::array<std::int64_t, 4> strides{};
  std::int64_t offset = 0;

  std::int64_t element(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return offset + i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3];
  }
  std::int64_t numel() const { return dims[0] * dims[1] * dims[2] * dims[3]; }
};

// Row-major (packed) strides for dims, offset 0.
inline StridedView packed_view(std::int64_t d0, std::int64_t d1, std::int64_t d2, std::int64_t d3) {
  return {{d0, d1, d2, d3}, {d1 * d2 * d3, d2 * d3, d3, 1}, 0};
}

// The same elements with the last two dimensions swapped, e.g. K^T (b, h, d, s) from K (b, h, s, d).
inline StridedView transposed(StridedView v) {
  std::swap(v.dims[2], v.dims[3]);
  std::swap(v.strides[2], v.strides[3]);
  return v;
}

// `heads` heads of head_dim columns from the first column of a row-major (batch, seq,
// row_width) buffer, for the first `rows` rows of each sequence: (batch, heads, rows, head_dim).
inline StridedView heads_view(std::int64_t batch, std::int64_t heads, std::int64_t rows, std::int64_t head_dim,
                              std::int64_t seq, std::int64_t row_width) {
  return {{batch, heads, rows, head_dim}, {seq * row_width, head_dim, row_width, 1}, 0};
}

// Q in qkv (and dQ in dqkv): (B, H, S, Dh).
inline StridedView query_view(const AttentionDims& a) {
  return heads_view(a.batch, a.heads, a.seq, a.head_dim, a.seq, a.qkv_width());
}

// K in qkv (and dK in dqkv): (B, Hkv, S, Dh), after the H query heads.
inline StridedView key_view(const AttentionDims& a) {
  StridedView v = query_view(a);
  v.dims[1] = a.kv_heads;
  v.offset = a.heads * a.head_dim;
  return v;
}

// V in qkv (and dV in dqkv): (B, Hkv, S, Dh), after the H query and Hkv key heads.
inline StridedView value_view(const AttentionDims& a) {
  StridedView v = key_view(a);
  v.offset = (a.heads + a.kv_heads) * a.head_dim;
  return v;
}

// O in out (and dO in dout), both (B, S, H Dh): (B, H, S, Dh).
inline StridedView output_view(const AttentionDims& a) {
  return heads_view(a.batch, a.heads, a.seq, a.head_dim, a.seq, a.out_width());
}

// lse (B, H, S) as cuDNN's softmax statistics (B, H, S, 1).
inline StridedView stats_view(const AttentionDims& a) { return packed_view(a.batch, a.heads, a.seq, 1); }

// cuDNN's fused backward needs two fp32 scratch tensors beside its own workspace:
//   dQ accumulator (B, H, S, Dh), summed over key tiles before the cast into dqkv;
//   row_dot        (B, H, S, 1) = rowsum(dO * O), the softmax-gradient correction.
// Both live at the start of the workspace buffer; the plan's own workspace follows them.
constexpr std::size_t kScratchAlignment = 256;

inline std::size_t align_scratch(std::size_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

struct BackwardScratch {
  std::size_t dq_accum_offset = 0;  // bytes into the workspace
  std::size_t row_dot_offset = 0;
  std::size_t bytes = 0;  // both regions, aligned: where the plan's workspace starts
};

inline BackwardScratch backward_scratch(const AttentionDims& a) {
  const auto rows = static_cast<std::size_t>(a.batch * a.heads * a.seq);
  BackwardScratch s;
  s.dq_accum_offset = 0;
  s.row_dot_offset = align_scratch(rows * static_cast<std::size_t>(a.head_dim) * sizeof(float));
  s.bytes = s.row_dot_offset + align_scratch(rows * sizeof(float));
  return s;
}

inline StridedView dq_accum_view(const AttentionDims& a) {
  return packed_view(a.batch, a.heads, a.seq, a.head_dim);
}
inline StridedView row_dot_view(const AttentionDims& a) { return packed_view(a.batch, a.heads, a.seq, 1); }

// Largest head dimension we hand to cuDNN. 9.19 serves up to 256 on Hopper for both passes,
// but 128 is where the fused forward and backward are established on sm_80 through sm_100.
constexpr std::int64_t kMaxCudnnHeadDim = 128;
// The graphs pass the window as an fp32 scalar, exact up to 2^24.
constexpr std::int64_t kMaxCudnnWindow = std::int64_t{1} << 24;

// THE place that says which attention shapes cuDNN's fused flash attention should take: ""
// when it should, else why not (for the log). Everything that decides between cuDNN and our
// kernel asks here: CudnnAttention offers cuDNN only these shapes, USTRAIN_REQUIRE_CUDNN=1
// turns a refusal into an error only for these (the rest run our kernel under it too), and the
// gpu-plan test (tests/gpu_plan) plans such shapes for an H100 without a GPU.
//   - bf16 or f16 activations: the fused flash engines are half precision (cuDNN 9.19 plans an
//     fp32 forward graph too, but no fp32 backward), so fp32 runs our kernel in both passes;
//   - head_dim a multiple of 8, so every view into the fused buffers is 16-byte aligned (its
//     tensor-core requirement; other head sizes get no engine), and at most kMaxCudnnHeadDim;
//   - at least two tokens (its backward refuses one-token sequences), and query heads that
//     are a whole multiple of the kv heads (grouped-query attention);
//   - a window of at least one key (the frontend's left bound; the caller passes 0 for a
//     window that spans the sequence, so such shapes share the unwindowed plan).
// Document ids never reach cuDNN (kernels/README.md says why).
inline std::string cudnn_unsupported_reason(const AttentionDims& a, DType act) {
  if (act != DType::bf16 && act != DType::f16) return "fused attention is bf16/f16 only";
  if (a.batch < 1 || a.seq < 2) return "needs at least one sequence of two or more tokens";
  if (a.heads < 1 || a.kv_heads < 1 || a.heads % a.kv_heads != 0)
    return "query heads are not a whole multiple of the kv heads";
  if (a.head_dim < 8 || a.head_dim % 8 != 0) return "head_dim is not a multiple of 8";
  if (a.head_dim > kMaxCudnnHeadDim) return "head_dim is above " + std::to_string(kMaxCudnnHeadDim);
  if (a.window < 0) return "a negative window";
  if (a.window > kMaxCudnnWindow) return "a window past 2^24 keys (cuDNN reads it as fp32)";
  return "";
}

inline bool cudnn_supports(const AttentionDims& a, DType act) { return cudnn_unsupported_reason(a, act).empty(); }

// ---- one block of attention over blocks of the sequence (kernels/cuda/attention/attention_blocks.h) ----
//
//   qkv (B, Sq, W): the block's query rows [q_begin, q_begin + q_rows)
//   kv  (B, Skv, 2 Hkv Dh) = [k heads | v heads]: its key rows [k_begin, k_begin + kv_rows)
//   out (B, q_rows, H Dh), lse (B, H, q_rows): the block's result (forward)
//   out, dout (B, Sq, H Dh), lse (B, H, Sq): the merged result, read at the block's rows (backward)
//
// The views below start at the block's first row: the caller advances each buffer's pointer
// by begin * (its row width) elements, which keeps it 16-byte aligned when head_dim is a
// multiple of 8.
struct BlockAttentionDims {
  std::int64_t batch = 0;
  std::int64_t q_seq = 0, kv_seq = 0;    // rows per batch row of qkv (out, dout) and of kv
  std::int64_t q_rows = 0, kv_rows = 0;  // the block's query and key rows
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = false;  // query r sees keys 0 .. r + kv_rows - q_rows (end-aligned)
  std::int64_t window = 0;  // on a causal block: query r sees keys r - c < window; 0 = none

  std::int64_t qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  std::int64_t kv_width() const { return 2 * kv_heads * head_dim; }
  std::int64_t out_width() const { return heads * head_dim; }
};

// Q in qkv: (B, H, q_rows, Dh).
inline StridedView block_query_view(const BlockAttentionDims& a) {
  return heads_view(a.batch, a.heads, a.q_rows, a.head_dim, a.q_seq, a.qkv_width());
}
// K in kv: (B, Hkv, kv_rows, Dh).
inline StridedView block_key_view(const BlockAttentionDims& a) {
  return heads_view(a.batch, a.kv_heads, a.kv_rows, a.head_dim, a.kv_seq, a.kv_width());
}
// V in kv: (B, Hkv, kv_rows, Dh), after the Hkv key heads.
inline StridedView block_value_view(const BlockAttentionDims& a) {
  StridedView v = block_key_view(a);
  v.offset = a.kv_heads * a.head_dim;
  return v;
}
// The merged O and dO in out, dout (B, Sq, H Dh): (B, H, q_rows, Dh).
inline StridedView block_merged_output_view(const BlockAttentionDims& a) {
  return heads_view(a.batch, a.heads, a.q_rows, a.head_dim, a.q_seq, a.out_width());
}
// The block's own rows (B, q_rows, H Dh) as (B, H, q_rows, Dh): its O, and dQ.
inline StridedView block_output_view(const BlockAttentionDims& a) {
  return heads_view(a.batch, a.heads, a.q_rows, a.head_dim, a.q_rows, a.out_width());
}
// dK and dV of the block's own rows (B, kv_rows, 2 Hkv Dh): (B, Hkv, kv_rows, Dh).
inline StridedView block_key_grad_view(const BlockAttentionDims& a) {
  return heads_view(a.batch, a.kv_heads, a.kv_rows, a.head_dim, a.kv_rows, a.kv_width());
}
inline StridedView block_value_grad_view(const BlockAttentionDims& a) {
  StridedView v = block_key_grad_view(a);
  v.offset = a.kv_heads * a.head_dim;
  return v;
}
// lse (B, H, q_rows), packed: the block's own (forward) and the merged one's rows (backward).
inline StridedView block_stats_view(const BlockAttentionDims& a) { return packed_view(a.batch, a.heads, a.q_rows, 1); }

// cuDNN reads and writes the activation dtype where our block ops hold fp32, so the block ops
// stage through scratch ahead of the plan's own workspace:
//   forward   O (B, q_rows, H Dh) in act, then widened into the fp32 block out;
//   backward  the dQ accumulator and row_dot (as backward_scratch), the merged lse's rows
//             (B, H, q_rows) packed, and dQ (B, q_rows, H Dh), dK|dV (B, kv_rows, 2 Hkv Dh) in
//             act, then added into the fp32 sums.
struct BlockScratch {
  std::size_t out_offset = 0;       // forward
  std::size_t dq_accum_offset = 0;  // backward, from here on
  std::size_t row_dot_offset = 0;
  std::size_t lse_offset = 0;
  std::size_t dq_offset = 0;
  std::size_t dkv_offset = 0;
  std::size_t bytes = 0;
};

inline BlockScratch block_forward_scratch(const BlockAttentionDims& a, std::size_t act_bytes) {
  BlockScratch s;
  s.bytes = align_scratch(static_cast<std::size_t>(a.batch * a.q_rows * a.out_width()) * act_bytes);
  return s;
}

inline BlockScratch block_backward_scratch(const BlockAttentionDims& a, std::size_t act_bytes) {
  const auto rows = static_cast<std::size_t>(a.batch * a.heads * a.q_rows);
  BlockScratch s;
  s.row_dot_offset = align_scratch(rows * static_cast<std::size_t>(a.head_dim) * sizeof(float));
  s.lse_offset = s.row_dot_offset + align_scratch(rows * sizeof(float));
  s.dq_offset = s.lse_offset + align_scratch(rows * sizeof(float));
  s.dkv_offset = s.dq_offset + align_scratch(static_cast<std::size_t>(a.batch * a.q_rows * a.out_width()) * act_bytes);
  s.bytes = s.dkv_offset + align_scratch(static_cast<std::size_t>(a.batch * a.kv_rows * a.kv_width()) * act_bytes);
  return s;
}

inline StridedView block_dq_accum_view(const BlockAttentionDims& a) {
  return packed_view(a.batch, a.heads, a.q_rows, a.head_dim);
}
inline StridedView block_row_dot_view(const BlockAttentionDims& a) { return packed_view(a.batch, a.heads, a.q_rows, 1); }

// Which blocks cuDNN's fused attention should take: "" when it should, else why not. The
// whole-sequence conditions (dtype, head_dim, group) apply to the block, and
//   - at least two query rows and two key rows (the whole-sequence bound, for both);
//   - the causal mask only for blocks of equal length, where ours (end-aligned) and cuDNN's
//     (top-left, the one our whole-sequence graphs use) agree; a causal block of unequal
//     lengths runs our kernel (cuDNN 9.19 aligns the diagonal at the bottom right only through
//     a pattern of index arithmetic we have not verified on a GPU);
//   - a window only on a causal block (cuDNN's band needs the causal diagonal).
// The backward also needs the merged out in the activation dtype (the caller checks that).
inline std::string cudnn_block_unsupported_reason(const BlockAttentionDims& a, DType act) {
  if (a.batch < 1 || a.q_rows < 2 || a.kv_rows < 2) return "needs two or more query rows and key rows";
  if (a.causal && a.q_rows != a.kv_rows) return "a causal block of unequal query and key lengths";
  if (a.window != 0 && !a.causal) return "a window on a block without the causal mask";
  const AttentionDims whole{a.batch, a.q_rows, a.heads, a.kv_heads, a.head_dim, a.window};
  return cudnn_unsupported_reason(whole, act);
}

inline bool cudnn_block_supports(const BlockAttentionDims& a, DType act) {
  return cudnn_block_unsupported_reason(a, act).empty();
}

}  // namespace ustrain::cuda
