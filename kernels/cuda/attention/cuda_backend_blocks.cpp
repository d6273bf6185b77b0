// CudaBackend's attention, the block ops: checks shapes and dtypes (as the CPU reference does),
// then hands raw pointers to cuDNN (kernels/cuda/attention/cudnn_attention.h) for the blocks it takes,
// and to our kernels (kernels/cuda/attention/attention_blocks.h) for the rest and the light ops. A causal
// self block of the whole sequence with its results in the activation dtype is what cuDNN's
// whole-sequence graphs take; packed blocks go to its block graphs. cuDNN takes a window on a
// causal block whose positions agree with its top-left diagonal (q_first == k_first); document
// ids always run our kernels (kernels/README.md says why). qkv, kv, dout and dqkv are
// in the activation dtype; packed blocks' results, the running result, lse and the gradient
// sums fp32; the merged out the backward reads in either (cuDNN only in the activation dtype).
#include <cstdint>
#include <string>

#include "kernels/attention_block_operands.h"
#include "kernels/block_mask_rows.h"
#include "kernels/cuda/attention/attention_blocks.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_checks.h"
#include "kernels/cuda/attention/cudnn_attention.h"

namespace ustrain::cuda {
namespace {

// The document ids of the block's rows as the kernels read them: from column `first` of the
// (B, n) ids of every position (kernels/attention_mask.h), n apart.
const std::int32_t* document_rows(const Tensor& ids, std::int64_t first, std::int64_t& stride, const char* what) {
  expect_i32(ids, what);
  stride = ids.shape[1];
  return ids.i32() + first;
}

// The block of query rows q of qkv (B, Sq, W) and key rows k of kv (B, Skv, 2 Hkv Dh), or of
// qkv's own keys when kv is empty.
AttentionBlock block_of(const Tensor& qkv, SeqRange q, const Tensor& kv, SeqRange k, const AttentionMask& mask,
                        int n_heads, int n_kv_heads) {
  const BlockOperands o = block_operands(qkv, q, kv, k, n_heads, n_kv_heads);
  AttentionBlock a;
  a.batch = qkv.shape[0];
  a.q_seq = qkv.shape[1];
  a.kv_seq = o.kv_seq;
  a.q_begin = q.begin;
  a.q_count = q.count;
  a.k_begin = k.begin;
  a.k_count = k.count;
  a.heads = n_heads;
  a.kv_heads = n_kv_heads;
  a.head_dim = static_cast<int>(o.head_dim);
  a.causal = mask.kind == AttentionMask::Kind::causal;
  a.self = o.self;
  check_block_mask(mask, a.batch, q.count, k.count);
  a.window = mask.window;
  a.diagonal = mask.q_first - mask.k_first;
  if (mask.has_documents() && a.batch > 0 && q.count > 0 && k.count > 0) {  // check_block_mask checked them
    a.q_documents = document_rows(mask.q_documents, mask.q_first, a.q_documents_stride, "query document ids");
    a.k_documents = document_rows(mask.k_documents, mask.k_first, a.k_documents_stride, "key document ids");
  }
  return a;
}

// Whether cuDNN's graphs can express the block's mask: no document ids, and a window only on
// the causal diagonal they align top-left (the first query and key rows at one position).
bool cudnn_takes_mask(const AttentionBlock& a) {
  return !a.has_documents() && (a.window == 0 || (a.causal && a.diagonal == 0));
}

// Whether the block is the whole causal sequence against its own keys: cuDNN's whole-sequence
// graphs, which write the activation dtype.
bool whole_causal_sequence(const AttentionBlock& a) {
  return a.self && a.causal && a.q_begin == 0 && a.k_begin == 0 && a.q_count == a.q_seq && a.k_count == a.q_seq &&
         cudnn_takes_mask(a);
}

// The window as cuDNN's graphs take it: 0 when it spans every query row (the causal band is
// then the whole mask), so such shapes share the plan without one.
std::int64_t cudnn_window(const AttentionBlock& a) { return a.window < a.q_count ? a.window : 0; }

// The same block as cuDNN's graphs see it (a packed block whose mask they express).
BlockAttentionDims cudnn_dims(const AttentionBlock& a) {
  return {a.batch, a.q_seq, a.kv_seq, a.q_count, a.k_count, a.heads, a.kv_heads, a.head_dim, a.causal,
          cudnn_window(a)};
}

bool cudnn_block(const AttentionBlock& a) { return !a.self && cudnn_takes_mask(a); }

}  // namespace

void CudaBackend::attention_kv_pack(Tensor kv, Tensor qkv, int n_heads, int n_kv_heads) {
  const DType act = act_of("attention_kv_pack", {&qkv, &kv});
  USTRAIN_ASSERT(n_heads > 0 && n_kv_heads > 0, "attention_kv_pack: " + std::to_string(n_heads) + "/" +
                                                    std::to_string(n_kv_heads) + " heads");
  const std::int64_t rows = qkv.shape.rows(), width = qkv.shape.last(), kv_width = kv.shape.last();
  const std::int64_t head_dim = width / (n_heads + 2 * n_kv_heads), skip = n_heads * head_dim;
  USTRAIN_ASSERT(kv.shape.rows() == rows && kv_width == 2 * n_kv_heads * head_dim && skip + kv_width == width,
                 "kv " + kv.shape.str() + " for qkv " + qkv.shape.str());
  cuda::attention_kv_pack(kv.data, qkv.data, rows, width, kv_width, dtype_size(act), stream_.get());
}

void CudaBackend::attention_block_forward(Tensor out, Tensor lse, Tensor qkv, SeqRange q, Tensor kv, SeqRange k,
                                          AttentionMask mask, int n_heads, int n_kv_heads) {
  const DType act =
      kv.empty() ? act_of("attention_block_forward", {&qkv}) : act_of("attention_block_forward", {&qkv, &kv});
  expect_device(out, "block attention out");
  expect_f32(lse, "block attention lse");
  const AttentionBlock a = block_of(qkv, q, kv, k, mask, n_heads, n_kv_heads);
  USTRAIN_ASSERT(out.dtype == DType::f32 || (a.self && out.dtype == act),
                 std::string("block attention out must be f32") +
                     (a.self ? std::string(" or ") + dtype_name(act) : std::string()) + ", got " +
                     dtype_name(out.dtype));
  USTRAIN_ASSERT(out.numel() == a.batch * q.count * n_heads * a.head_dim && lse.numel() == a.batch * n_heads * q.count,
                 "block out " + out.shape.str() + ", lse " + lse.shape.str() + " for " + std::to_string(q.count) +
                     " queries");
  if (whole_causal_sequence(a) && out.dtype == act &&
      attention_->forward(out.data, lse.f32(), qkv.data, a.batch, a.q_seq, n_heads, n_kv_heads, a.head_dim,
                          cudnn_window(a), act, stream_.get()))
    return;
  if (cudnn_block(a) && attention_->block_forward(out.f32(), lse.f32(), qkv.data, kv.data, a.q_begin, a.k_begin,
                                           cudnn_dims(a), act, stream_.get()))
    return;
  cuda::attention_block_forward(out.data, out.dtype, lse.f32(), qkv.data, kv.data, a, act, stream_.get());
}

void CudaBackend::attention_merge(Tensor acc, Tensor lse, Tensor block_out, Tensor block_lse, SeqRange q) {
  expect_f32(acc, "merged attention acc");
  expect_f32(lse, "merged attention lse");
  expect_f32(block_out, "block attention out");
  expect_f32(block_lse, "block attention lse");
  USTRAIN_ASSERT(acc.shape.rank() == 3 && lse.shape.rank() == 3, "merge needs acc (B, S, H Dh) and lse (B, H, S)");
  const std::int64_t B = acc.shape[0], S = acc.shape[1], OW = acc.shape[2], H = lse.shape[1];
  USTRAIN_ASSERT(H > 0 && OW % H == 0, "merge: acc " + acc.shape.str() + " for lse " + lse.shape.str());
  check_seq_range(q, S, "merged");
  USTRAIN_ASSERT(lse.shape[0] == B && lse.shape[2] == S && block_out.numel() == B * q.count * OW &&
                     block_lse.numel() == B * H * q.count,
                 "merge of block " + block_out.shape.str() + ", " + block_lse.shape.str() + " into " + acc.shape.str());
  cuda::attention_merge(acc.f32(), lse.f32(), block_out.f32(), block_lse.f32(), B, S, static_cast<int>(H),
                        static_cast<int>(OW / H), q.begin, q.count, stream_.get());
}

void CudaBackend::attention_block_backward(Tensor dq, Tensor dkv, Tensor dout, Tensor qkv, SeqRange q, Tensor kv,
                                           SeqRange k, Tensor out, Tensor lse, AttentionMask mask, int n_heads,
                                           int n_kv_heads) {
  const DType act = kv.empty() ? act_of("attention_block_backward", {&qkv, &dout})
                               : act_of("attention_block_backward", {&qkv, &kv, &dout});
  expect_device(out, "attention_block_backward out");
  USTRAIN_ASSERT(out.dtype == act || out.dtype == DType::f32, std::string("attention_block_backward: out must be ") +
                                                                  dtype_name(act) + " or f32, got " +
                                                                  dtype_name(out.dtype));
  expect_f32(lse, "block attention lse");
  const AttentionBlock a = block_of(qkv, q, kv, k, mask, n_heads, n_kv_heads);
  const std::int64_t out_numel = a.batch * a.q_seq * n_heads * a.head_dim;
  USTRAIN_ASSERT(out.numel() == out_numel && dout.numel() == out_numel && lse.numel() == a.batch * n_heads * a.q_seq,
                 "block backward: out " + out.shape.str() + ", dout " + dout.shape.str() + ", lse " + lse.shape.str() +
                     " for qkv " + qkv.shape.str());
  if (a.self) {  // dq is dqkv, overwritten: the whole sequence, its gradient in act or fp32
    expect_device(dq, "self block attention dqkv");
    USTRAIN_ASSERT(dq.shape == qkv.shape && dkv.empty() && (dq.dtype == act || dq.dtype == DType::f32) &&
                       q.begin == 0 && q.count == a.q_seq && k.begin == 0 && k.count == a.q_seq,
                   "self block backward: dqkv " + dq.shape.str() + " (" + dtype_name(dq.dtype) + ") for qkv " +
                       qkv.shape.str() + ", no dkv, every query and key row");
  } else {
    expect_f32(dq, "block attention dq");
    expect_f32(dkv, "block attention dkv");
    USTRAIN_ASSERT(dq.numel() == out_numel && dkv.shape == kv.shape,
                   "block backward: dq " + dq.shape.str() + ", dkv " + dkv.shape.str() + " for kv " + kv.shape.str());
  }
  if (whole_causal_sequence(a) && dq.dtype == act && out.dtype == act &&
      attention_->backward(dq.data, dout.data, qkv.data, out.data, lse.f32(), a.batch, a.q_seq, n_heads, n_kv_heads,
                           a.head_dim, cudnn_window(a), act, stream_.get()))
    return;
  if (cudnn_block(a) && out.dtype == act &&
      attention_->block_backward(dq.f32(), dkv.f32(), dout.data, qkv.data, kv.data, out.data, lse.f32(), a.q_begin,
                                 a.k_begin, cudnn_dims(a), act, stream_.get()))
    return;
  void* ws = scratch(attention_block_backward_workspace_bytes(a), "attention_block_backward");
  cuda::attention_block_backward(dq.data, a.self ? nullptr : dkv.data, dq.dtype, dout.data, qkv.data, kv.data, out.data,
                                 out.dtype, lse.f32(), a, act, ws, stream_.get());
}

void CudaBackend::attention_grad_pack(Tensor dqkv, Tensor dq, Tensor dkv) {
  const DType act = act_of("attention_grad_pack", {&dqkv});
  expect_f32(dq, "attention_grad_pack dq");
  expect_f32(dkv, "attention_grad_pack dkv");
  const std::int64_t rows = dqkv.shape.rows(), q_width = dq.shape.last(), kv_width = dkv.shape.last();
  USTRAIN_ASSERT(dq.shape.rows() == rows && dkv.shape.rows() == rows && q_width + kv_width == dqkv.shape.last(),
                 "dqkv " + dqkv.shape.str() + " from dq " + dq.shape.str() + " and dkv " + dkv.shape.str());
  cuda::attention_grad_pack(dqkv.data, dq.f32(), dkv.f32(), rows, q_width, kv_width, act, stream_.get());
}

}  // namespace ustrain::cuda
