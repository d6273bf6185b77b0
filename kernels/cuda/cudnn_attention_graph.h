// cuDNN operation graphs for causal GQA flash attention, forward and backward, and the choice
// of an execution plan for them.
//
// cuDNN has no single "attention" operation for this (9.19); its fused flash-attention
// engines instead recognise a fixed pattern of matmul / pointwise / reduction / reshape
// operations: the pattern cuDNN's C++ frontend expands its sdpa and sdpa_backward nodes into
// for this version. The graphs below spell that pattern out operation by operation; a graph
// that strays from it finds no engine (CudnnNotSupported), not a slower one.
// Internal to the cuDNN sources in kernels/cuda.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/attention_layout.h"
#include "kernels/cuda/cudnn_descriptor.h"

namespace ustrain::cuda {

// Unique ids of the tensors an execution supplies pointers for (virtual ones follow).
enum AttentionUid : std::int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,    // lse
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
  kUidDqAccum,  // fp32 scratch, backward
  kUidRowDot,   // fp32 scratch, backward
  kUidScale,    // fp32 scalars passed by value from host memory
  kUidNegInf,
  kUidOne,
  kUidCount,
  kFirstVirtualUid = 100,
};

// A finalized operation graph and every descriptor it references (kept alive with it).
struct AttentionGraph {
  std::vector<CudnnDescriptor> parts;
  CudnnDescriptor graph;
  std::vector<std::int64_t> uids;  // the non-virtual tensors, each once
};

// Q, K, V from qkv; O and lse out. `io` is the activation dtype (CUDNN_DATA_BFLOAT16/HALF).
// `handle` may be null (the graph then builds without a GPU, but cannot be planned).
AttentionGraph attention_forward_graph(cudnnHandle_t handle, const AttentionDims& a, cudnnDataType_t io);
// dQ, dK, dV (into dqkv) from Q, K, V, O, dO, lse, with the two fp32 scratch tensors of
// backward_scratch(). dK and dV are summed over the query heads of each group by cuDNN.
AttentionGraph attention_backward_graph(cudnnHandle_t handle, const AttentionDims& a, cudnnDataType_t io);

struct ExecutionPlan {
  CudnnDescriptor engine_config;  // referenced by the plan
  CudnnDescriptor plan;
  std::int64_t workspace_bytes = 0;  // what cuDNN asks for
};

// The first engine configuration of heuristics mode A that finalizes into a plan. Throws
// CudnnNotSupported, listing each configuration's refusal, when none does.
ExecutionPlan make_execution_plan(const AttentionGraph& graph);

}  // namespace ustrain::cuda
