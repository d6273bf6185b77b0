// Embedding lookup and its deterministic scatter-add backward on CUDA, as
// kernels/cpu/cpu_embedding.cpp. The table and dout are in the activation dtype `act`
// (f32, bf16 or f16); dtable is fp32 or `act`. Asynchronous on `stream`.
//
// Ids come from the host, where the backend checks them against the vocabulary before they
// are copied; here an id outside [0, V) only has to be harmless: its forward row is zeros
// and its backward row is skipped. Nothing reads or writes out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/tensor.h"

namespace ustrain::cuda {

// out (N, D) = table (V, D)[ids (N) - begin]. With begin > 0 the table is one shard of a
// vocabulary-parallel table: ids outside [begin, begin + V) are other shards' (zero rows).
void embedding_forward(void* out, const std::int32_t* ids, const void* table, std::int64_t n, std::int64_t vocab,
                       std::int64_t dim, DType act, cudaStream_t stream, std::int64_t begin = 0);

// Scratch for embedding_backward with n ids: the sorted (id, position) pairs and the radix
// sort's temporary storage, a bound worked out without the device
// (kernels/cuda/scratch_sizes.h: embedding_backward_scratch_bytes).
std::size_t embedding_backward_workspace_bytes(std::int64_t n);

// dtable (V, D) += dout (N, D) scattered at ids (N). Deterministic, bitwise the same on every
// run and, for f32, the same as the CPU backend: each table row gets the rows of dout of its
// id added one at a time in position order. `workspace` holds
// embedding_backward_workspace_bytes(n) bytes (any alignment: the parts are aligned inside).
// With begin > 0, as embedding_forward: only ids in [begin, begin + V) add into the table.
// dtable in `act` (table_dtype == act; a mixture of experts scatters rows with it) gets each
// cell's sum in fp32, its old value included, rounded once.
void embedding_backward(void* dtable, DType table_dtype, const std::int32_t* ids, const void* dout, std::int64_t n,
                        std::int64_t vocab, std::int64_t dim, DType act, void* workspace, cudaStream_t stream,
                        std::int64_t begin = 0);

}  // namespace ustrain::cuda
