// Attention over blocks of the sequence with plain CUDA-core kernels: the ops of
// kernels/backend.h's attention section, with the semantics of the CPU reference
// (kernels/cpu/cpu_attention.cpp), for every block cuDNN does not take
// (kernels/cuda/attention/cudnn_attention.h) and the light ops around them. Softmax scale 1/sqrt(Dh), query head
// h reads kv head h / (H / Hkv); memory O(S), never O(S^2); head_dim up to 256. Every
// gradient element is summed by one thread in a fixed order (no atomics): deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// One block: query rows [q_begin, q_begin + q_count) of qkv (B, Sq, (H + 2 Hkv) Dh) against
// key rows [k_begin, k_begin + k_count) of kv (B, Skv, 2 Hkv Dh) = [k heads | v heads], or of
// qkv's own k and v columns (self; Skv = Sq). Query row r of the block sees key row c when
// every condition set holds (kernels/attention_mask.h, with i - j = r - c + diagonal):
//   causal     c <= r + k_count - q_count (end-aligned);
//   window W   r - c + diagonal < W;
//   documents  q_documents[b, r] == k_documents[b, c].
// Tiles of query and key rows with no such pair are skipped: the work follows the mask.
struct AttentionBlock {
  std::int64_t batch = 0, q_seq = 0, kv_seq = 0;
  std::int64_t q_begin = 0, q_count = 0, k_begin = 0, k_count = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = false;
  bool self = false;
  std::int64_t window = 0;    // 0: none
  std::int64_t diagonal = 0;  // q_first - k_first: a query's absolute position minus a key's at r = c
  // The document ids of the block's first query and key row of batch row 0 (device i32, the
  // column of its absolute position in the mask's ids), and the distance between batch rows;
  // null: one document.
  const std::int32_t* q_documents = nullptr;
  const std::int32_t* k_documents = nullptr;
  std::int64_t q_documents_stride = 0, k_documents_stride = 0;

  bool has_documents() const { return q_documents != nullptr; }
};

// kv (rows, kv_width) = columns [width - kv_width, width) of qkv (rows, width), elements of
// `element_bytes` bytes (a strided copy, no conversion).
void attention_kv_pack(void* kv, const void* qkv, std::int64_t rows, std::int64_t width, std::int64_t kv_width,
                       std::size_t element_bytes, cudaStream_t stream);

// out (B, q_count, H Dh) in `out_type` (f32 or act) and lse (B, H, q_count) fp32 of the block;
// qkv and kv in `act` (kv unused for a self block). A query row that sees no key gets out 0
// and lse -inf.
void attention_block_forward(void* out, DType out_type, float* lse, const void* qkv, const void* kv,
                             const AttentionBlock& a, DType act, cudaStream_t stream);

// Merges a block's result into rows [q_begin, q_begin + q_count) of the running result
// acc (B, S, H Dh) fp32 and its lse (B, H, S): acc = (acc e^lse + block e^block_lse) / e^lse',
// lse' = log(e^lse + e^block_lse); rows whose block lse is -inf are left alone.
// block_out (B, q_count, H Dh), block_lse (B, H, q_count).
void attention_merge(float* acc, float* lse, const float* block_out, const float* block_lse, std::int64_t batch,
                     std::int64_t seq, int heads, int head_dim, std::int64_t q_begin, std::int64_t q_count,
                     cudaStream_t stream);

// Scratch bytes attention_block_backward needs: one fp32 per (b, h, query row of the block).
std::size_t attention_block_backward_workspace_bytes(const AttentionBlock& a);

// The block's backward from the merged result: out and dout (B, Sq, H Dh), lse (B, H, Sq).
// Packed keys: dq (B, Sq, H Dh) += at the block's query rows and dkv (B, Skv, 2 Hkv Dh) += at
// its key rows, both fp32 (`grad_type`). A self block: dq is dqkv (B, Sq, W) in `grad_type`
// (f32 or act), its block rows overwritten; dkv unused. qkv, kv and dout in `act`; out in
// `act` or f32 (`out_type`).
void attention_block_backward(void* dq, void* dkv, DType grad_type, const void* dout, const void* qkv,
                              const void* kv, const void* out, DType out_type, const float* lse,
                              const AttentionBlock& a, DType act, void* workspace, cudaStream_t stream);

// dst (B, dst_seq, width) fp32 rows [0, rows) += src (B, rows, width) in `src_type` (f32, bf16
// or f16): a block's gradients in the activation dtype into the fp32 sums (dst points at the
// block's first row of batch row 0).
void attention_add_rows(float* dst, std::int64_t dst_seq, const void* src, DType src_type, std::int64_t batch,
                        std::int64_t rows, std::int64_t width, cudaStream_t stream);

// dqkv (rows, q_width + kv_width) = [dq (rows, q_width) | dkv (rows, kv_width)] row by row,
// fp32 rounded to `act` (nearest even).
void attention_grad_pack(void* dqkv, const float* dq, const float* dkv, std::int64_t rows, std::int64_t q_width,
                         std::int64_t kv_width, DType act, cudaStream_t stream);

}  // namespace ustrain::cuda
