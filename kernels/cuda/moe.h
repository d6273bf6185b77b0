// Mixture-of-experts routing and the gate-weighted combine on CUDA, as
// kernels/cpu/cpu_moe.cpp (the semantics are those of Backend::moe_route and friends in
// kernels/backend.h). Logits, rows, out, dout, drows and dlogits are in the activation dtype
// `act` (f32, bf16 or f16); probs, gates, dgates and lse are fp32; experts i32. The routing
// computes in double where the CPU op does (its sums, exp and log), the combine in fp32; every
// sum runs in a fixed order and nothing uses atomics, so results are the same run to run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// The shape of a routing: N tokens, E experts, top-k (1 <= k <= E).
struct MoeRouteShape {
  std::int64_t rows, experts, top_k;
};

// From logits (N, E): probs (N, E) = softmax or sigmoid; experts (N, k) the k highest of
// probs + bias (bias (E) fp32, or null for none), highest first, a tie going to the lower
// expert index; gates (N, k) their probs, divided by their sum when `renormalize`; lse (N) the
// log-sum-exp of the logits.
void moe_route(std::int32_t* experts, float* gates, float* probs, float* lse, const void* logits, const float* bias,
               MoeRouteShape shape, bool sigmoid, bool renormalize, DType act, cudaStream_t stream);

// dlogits (N, E) overwritten: dgates (N, k) back through the renormalisation and the score
// function, plus 2 z_grad lse softmax(logits) per row, plus seq_grad (N / seq_len, E) fp32 (or
// null), the gradient of the normalised scores of each sequence's seq_len tokens.
void moe_route_backward(void* dlogits, const float* dgates, const void* logits, const float* probs, const float* lse,
                        const std::int32_t* experts, const float* gates, const float* seq_grad, std::int64_t seq_len,
                        MoeRouteShape shape, bool sigmoid, bool renormalize, float z_grad, DType act,
                        cudaStream_t stream);

// out (N, D) = sum_j gates[t, j] * rows[t k + j], rows (N k, D) in token order.
void moe_combine(void* out, const void* rows, const float* gates, std::int64_t tokens, std::int64_t top_k,
                 std::int64_t dim, DType act, cudaStream_t stream);

// drows (N k, D) = gates[t, j] * dout[t]; dgates (N, k) = dout[t] . rows[t k + j].
void moe_combine_backward(void* drows, float* dgates, const void* dout, const void* rows, const float* gates,
                          std::int64_t tokens, std::int64_t top_k, std::int64_t dim, DType act, cudaStream_t stream);

}  // namespace ustrain::cuda
