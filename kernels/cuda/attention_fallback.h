// Causal grouped-query attention with plain CUDA-core kernels, for the shapes and dtypes
// the fused cuDNN kernel refuses (fp32, odd head dims, ...). Same semantics as the CPU op
// (kernels/cpu/cpu_attention.cpp): softmax scale 1/sqrt(Dh), query head h reads kv head
// h / (H / Hkv). Memory is O(S), never O(S^2); head_dim up to 256.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// qkv (B, S, (H + 2 Hkv) Dh), rows [q heads | k heads | v heads], in `act`;
// out (B, S, H Dh) in `act`; lse (B, H, S) fp32 = log sum_{j <= i} exp(q_i . k_j / sqrt(Dh)).
void attention_fallback_forward(void* out, float* lse, const void* qkv, std::int64_t batch, std::int64_t seq,
                                int n_heads, int n_kv_heads, int head_dim, DType act, cudaStream_t stream);

// Scratch bytes attention_fallback_backward needs: one fp32 per (b, h, i).
std::size_t attention_fallback_backward_workspace_bytes(std::int64_t batch, std::int64_t seq, int n_heads,
                                                        int n_kv_heads, int head_dim);

// dqkv (B, S, (H + 2 Hkv) Dh) overwritten, from dout and out (B, S, H Dh), qkv and the
// forward's lse (B, H, S). Deterministic: every gradient element is summed by one thread
// in a fixed order (no atomics).
void attention_fallback_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                                 std::int64_t batch, std::int64_t seq, int n_heads, int n_kv_heads, int head_dim,
                                 DType act, void* workspace, cudaStream_t stream);

}  // namespace ustrain::cuda
