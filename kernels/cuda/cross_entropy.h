// Fused softmax cross-entropy on the GPU: one block per row of logits, never storing the
// probabilities. Same semantics as the CPU op (kernels/cpu/cpu_cross_entropy.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// losses (N) = lse - logits[target]; lse (N) = log sum_v exp(logits[v]) in fp32.
// logits (N, V) in `act`. Rows whose target < 0 get loss 0 and lse 0. A target >= vocab is a
// caller bug: that row gets NaN loss and lse (nothing outside the row is read).
void cross_entropy_forward(float* losses, float* lse, const void* logits, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t vocab, DType act, cudaStream_t stream);

// dlogits (N, V) = (softmax(logits) - onehot(target)) * dloss, in `act`; may alias logits.
// Rows whose target < 0 get zeros; rows whose target >= vocab get NaN.
void cross_entropy_backward(void* dlogits, const void* logits, const float* lse, const std::int32_t* targets,
                            std::int64_t rows, std::int64_t vocab, float dloss, DType act, cudaStream_t stream);

// Vocabulary-parallel: logits (N, width) hold the ids [begin, begin + valid) in their first
// `valid` columns (the rest pad). stats (2, N) fp32 = [lse of the valid columns (-inf when
// valid = 0), the target's logit if it lies in the shard else 0]; rows whose target < 0: 0.
void cross_entropy_shard_stats(float* stats, const void* logits, const std::int32_t* targets, std::int64_t rows,
                               std::int64_t width, std::int64_t begin, std::int64_t valid, DType act,
                               cudaStream_t stream);
// parts (P, 2, N) of every shard -> lse (N) global and losses (N) = lse - target logit.
void cross_entropy_combine(float* losses, float* lse, const float* parts, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t shards, cudaStream_t stream);
// The backward on one shard with the global lse: padding columns and rows whose target < 0
// get zeros. May alias logits.
void cross_entropy_backward_shard(void* dlogits, const void* logits, const float* lse, const std::int32_t* targets,
                                  std::int64_t rows, std::int64_t width, std::int64_t begin, std::int64_t valid,
                                  float dloss, DType act, cudaStream_t stream);

}  // namespace ustrain::cuda
