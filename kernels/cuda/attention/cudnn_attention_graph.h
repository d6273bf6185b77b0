// cuDNN operation graphs for GQA flash attention, forward and backward, over the whole causal
// sequence or one block of it, and the choice of an execution plan for them.
//
// cuDNN has no single "attention" operation for this (9.19); its fused flash-attention
// engines instead recognise a fixed pattern of matmul / pointwise / reduction / reshape
// operations: the pattern cuDNN's C++ frontend expands its sdpa and sdpa_backward nodes into
// for this version. The graphs below spell that pattern out operation by operation; a graph
// that strays from it finds no engine (CudnnNotSupported), not a slower one.
// Internal to the cuDNN sources in kernels/cuda.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/attention/attention_layout.h"
#include "kernels/cuda/attention/cudnn_descriptor.h"

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
  kUidWindow,   // the sliding window in keys, an fp32 scalar by value
  kUidCount,
  kFirstVirtualUid = 100,
};

// A finalized operation graph and every descriptor it references (kept alive with it).
struct AttentionGraph {
  std::vector<CudnnDescriptor> parts;
  CudnnDescriptor graph;
  std::vector<std::int64_t> uids;  // the non-virtual tensors, each once
};

// What graphs are built and planned for: a GPU through its cuDNN handle (plans that execute),
// or a device described in JSON (described_device(); cuDNN 9.8 on), whose plans go through
// cuDNN's support checks and kernel build on a machine without a GPU but never execute. The
// backend uses the first, the gpu-plan test (tests/gpu_plan) the second, through the same code.
struct PlanTarget {
  cudnnHandle_t handle = nullptr;              // set on the graph and on each plan
  cudnnBackendDescriptor_t device = nullptr;   // CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR
};

// A finalized CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR for the device properties in `json` (the
// field names cuDNN uses: multiProcessorCount, deviceVer, maxSharedMemoryPerBlockOptin, ...).
CudnnDescriptor described_device(const std::string& json);

// Q, K, V from qkv; O and lse out. `io` is the activation dtype (CUDNN_DATA_BFLOAT16/HALF).
AttentionGraph attention_forward_graph(const PlanTarget& target, const AttentionDims& a, cudnnDataType_t io);
// dQ, dK, dV (into dqkv) from Q, K, V, O, dO, lse, with the two fp32 scratch tensors of
// backward_scratch(). dK and dV are summed over the query heads of each group by cuDNN.
AttentionGraph attention_backward_graph(const PlanTarget& target, const AttentionDims& a, cudnnDataType_t io);

// One block of attention over blocks of the sequence (attention_layout.h's block views), the
// same graphs with q_rows queries against kv_rows keys, causal (top-left, so only for blocks of
// equal length: cudnn_block_supports) or not. A window (AttentionDims::window,
// BlockAttentionDims::window) adds the band i - j < window to the causal mask. Forward: Q from qkv's rows, K and V from kv's,
// O (in `io`) and lse the block's own. Backward: O, dO and lse the merged result's rows; dQ,
// dK, dV (in `io`) the block's alone, with the fp32 scratch of block_backward_scratch().
AttentionGraph attention_block_forward_graph(const PlanTarget& target, const BlockAttentionDims& a,
                                             cudnnDataType_t io);
AttentionGraph attention_block_backward_graph(const PlanTarget& target, const BlockAttentionDims& a,
                                              cudnnDataType_t io);

struct ExecutionPlan {
  CudnnDescriptor engine_config;  // referenced by the plan
  CudnnDescriptor plan;
  std::int64_t workspace_bytes = 0;  // what cuDNN asks for
};

// One engine configuration that did not finalize into a plan: cuDNN's status and words.
struct PlanRefusal {
  std::int64_t config = 0;  // its rank among heuristics' proposals
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  std::string text;
};

// Whether cuDNN accepted the graph and built the plan's kernels, failing only when it loaded
// them into the driver: what planning for a described device reaches on a machine whose
// libcuda.so.1 is the toolkit's stub (CUDA_ERROR_STUB_LIBRARY, 34).
bool failed_only_at_module_load(const PlanRefusal& refusal);

// Heuristics mode A's engine configurations for `graph`, finalized in order into plans for
// `target` until one finalizes or, for a described device, until one fails only at the
// module load (`loadable_without_gpu`: the graph is accepted as far as a machine without a
// GPU can tell).
struct PlanSearch {
  std::int64_t proposed = 0;                  // configurations heuristics returned
  std::vector<PlanRefusal> refusals;          // in order, up to the one that ended the search
  std::optional<ExecutionPlan> plan;          // the first that finalized
  bool loadable_without_gpu = false;
  bool accepted() const { return plan.has_value() || loadable_without_gpu; }
  // "heuristics proposed N engine configurations; config 0: ...; config 1: ..."
  std::string summary() const;
};
PlanSearch search_execution_plans(const AttentionGraph& graph, const PlanTarget& target);

// The plan search_execution_plans() finds for a GPU's handle. Throws CudnnNotSupported,
// listing each configuration's refusal, when none finalizes.
ExecutionPlan make_execution_plan(const AttentionGraph& graph, const PlanTarget& target);

}  // namespace ustrain::cuda
