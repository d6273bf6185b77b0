// The forward and backward flash-attention graphs, operation by operation. Shapes are
// (b, h, s_q, s_kv) for scores and (b, h, s, 1) for per-row statistics. Everything inside
// the fused kernel is a virtual fp32 tensor, except the matmul operands cuDNN reads in the
// activation dtype: P for O = P V, P^T and dS^T (and the per-query-head partial sums under
// GQA) for the dV and dK matmuls, and K for dQ = dS K.
#include "kernels/cuda/attention/cudnn_attention_graph.h"

#include <string>
#include <utility>

#include "kernels/cuda/attention/cudnn_graph_builder.h"

namespace ustrain::cuda {
namespace {

// What one graph computes, and where its operands lie: views into the buffers an execution
// passes (their offsets are applied to the pointers, not in the graph). Causal is top-left:
// query i sees keys j <= i; a window (on a causal graph) keeps i - j < window.
enum class SdpaPass { forward, backward };
struct SdpaShape {
  std::int64_t batch = 0, heads = 0, kv_heads = 0, head_dim = 0, q_rows = 0, kv_rows = 0;
  bool causal = false;
  std::int64_t window = 0;
  StridedView q, k, v, o, stats;                  // o: the forward's output, the backward's input
  StridedView d_o, dq, dk, dv, dq_accum, row_dot;  // backward
};

// out (b, hkv, s_kv, d) = x y summed over the query heads of each group: a plain matmul when
// every query head has its own kv head, else a per-query-head matmul reduced over the group.
void matmul_summed_over_groups(GraphBuilder& g, const std::string& name, const SdpaShape& s, cudnnDataType_t io,
                               TensorDesc x, TensorDesc y, TensorDesc out) {
  if (s.heads == s.kv_heads) {
    g.matmul(name, x, y, out);
    return;
  }
  const TensorDesc per_head =
      g.virtual_tensor(name + " per query head", io, packed_view(s.batch, s.heads, s.kv_rows, s.head_dim));
  g.matmul(name, x, y, per_head);
  g.reduction(name + " summed over the group", CUDNN_REDUCE_TENSOR_ADD, per_head, out);
}

SdpaShape whole_sequence_shape(const AttentionDims& a) {
  SdpaShape s;
  s.batch = a.batch;
  s.heads = a.heads;
  s.kv_heads = a.kv_heads;
  s.head_dim = a.head_dim;
  s.q_rows = s.kv_rows = a.seq;
  s.causal = true;
  s.window = a.window;
  s.q = s.dq = query_view(a);
  s.k = s.dk = key_view(a);
  s.v = s.dv = value_view(a);
  s.o = s.d_o = output_view(a);
  s.stats = stats_view(a);
  s.dq_accum = dq_accum_view(a);
  s.row_dot = row_dot_view(a);
  return s;
}

SdpaShape block_shape(const BlockAttentionDims& a, SdpaPass pass) {
  SdpaShape s;
  s.batch = a.batch;
  s.heads = a.heads;
  s.kv_heads = a.kv_heads;
  s.head_dim = a.head_dim;
  s.q_rows = a.q_rows;
  s.kv_rows = a.kv_rows;
  s.causal = a.causal;
  s.window = a.window;
  s.q = block_query_view(a);
  s.k = block_key_view(a);
  s.v = block_value_view(a);
  s.o = s.d_o = pass == SdpaPass::forward ? block_output_view(a) : block_merged_output_view(a);
  s.stats = block_stats_view(a);
  s.dq = block_output_view(a);
  s.dk = block_key_grad_view(a);
  s.dv = block_value_grad_view(a);
  s.dq_accum = block_dq_accum_view(a);
  s.row_dot = block_row_dot_view(a);
  return s;
}

// The scores under the graph's masks: causal, then the window. -inf (and the window) are
// operands only under a mask: cuDNN refuses a variant pack naming a tensor the graph does not
// use (CUDNN_STATUS_BAD_PARAM_NULL_POINTER at execution).
TensorDesc masked_scores(GraphBuilder& g, const SdpaShape& s, TensorDesc scores, const StridedView& view) {
  if (!s.causal && s.window == 0) return scores;
  const TensorDesc neg_inf = g.scalar("-inf", kUidNegInf);
  const TensorDesc causal = s.causal ? g.causal_mask("causal", scores, neg_inf, view) : scores;
  if (s.window == 0) return causal;
  return g.window_mask("window", causal, neg_inf, g.scalar("window", kUidWindow), view);
}

// What both passes' graphs start from: the shapes of the scores and of a value per query row,
// and the Q and K^T operands (made first, in this order, in both graphs).
struct ScoreOperands {
  StridedView scores;  // (b, h, s_q, s_kv)
  StridedView rows;    // (b, h, s_q, 1)
  TensorDesc q, kt;
};

ScoreOperands score_operands(GraphBuilder& g, const SdpaShape& s, cudnnDataType_t io) {
  return {packed_view(s.batch, s.heads, s.q_rows, s.kv_rows), packed_view(s.batch, s.heads, s.q_rows, 1),
          g.io_tensor("Q", kUidQ, io, s.q), g.io_tensor("K^T", kUidK, io, transposed(s.k))};
}

// scale * Q K^T in fp32: the scores before any mask, in both passes.
TensorDesc scaled_scores(GraphBuilder& g, const ScoreOperands& in, TensorDesc scale) {
  const TensorDesc qk = g.virtual_tensor("Q K^T", CUDNN_DATA_FLOAT, in.scores);
  g.matmul("Q K^T", in.q, in.kt, qk);
  const TensorDesc scaled = g.virtual_tensor("scale * Q K^T", CUDNN_DATA_FLOAT, in.scores);
  g.binary("scale * Q K^T", CUDNN_POINTWISE_MUL, qk, scale, scaled);
  return scaled;
}

AttentionGraph sdpa_forward_graph(const PlanTarget& target, const SdpaShape& s, cudnnDataType_t io) {
  AttentionGraph graph;
  GraphBuilder g(graph);
  const ScoreOperands in = score_operands(g, s, io);
  const StridedView& scores = in.scores;
  constexpr cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const TensorDesc v = g.io_tensor("V", kUidV, io, s.v);
  const TensorDesc o = g.io_tensor("O", kUidO, io, s.o);
  const TensorDesc lse = g.io_tensor("lse", kUidStats, f32, s.stats);
  const TensorDesc scale = g.scalar("scale", kUidScale);

  // Scores: scale * Q K^T, causal or not.
  const TensorDesc masked = masked_scores(g, s, scaled_scores(g, in, scale), scores);

  // Softmax, saving lse = max + log(sum(exp(scores - max))): natural log of the scaled scores,
  // the statistic the backward pass and our CPU reference use.
  const TensorDesc row_max = g.virtual_tensor("row max", f32, in.rows);
  g.reduction("row max", CUDNN_REDUCE_TENSOR_MAX, masked, row_max);
  const TensorDesc shifted = g.virtual_tensor("scores - max", f32, scores);
  g.binary("scores - max", CUDNN_POINTWISE_SUB, masked, row_max, shifted);
  const TensorDesc e = g.virtual_tensor("exp(scores - max)", f32, scores);
  g.unary("exp(scores - max)", CUDNN_POINTWISE_EXP, shifted, e);
  const TensorDesc row_sum = g.virtual_tensor("row sum", f32, in.rows);
  g.reduction("row sum", CUDNN_REDUCE_TENSOR_ADD, e, row_sum);
  const TensorDesc log_sum = g.virtual_tensor("log(row sum)", f32, in.rows);
  g.unary("log(row sum)", CUDNN_POINTWISE_LOG, row_sum, log_sum);
  g.binary("lse = max + log(sum)", CUDNN_POINTWISE_ADD, row_max, log_sum, lse);
  const TensorDesc p = g.virtual_tensor("P", io, scores);  // the P V matmul reads P in the activation dtype
  g.binary("P = exp / sum", CUDNN_POINTWISE_DIV, e, row_sum, p);

  g.matmul("O = P V", p, v, o);
  g.finish(target);
  return graph;
}

AttentionGraph sdpa_backward_graph(const PlanTarget& target, const SdpaShape& s, cudnnDataType_t io) {
  AttentionGraph graph;
  GraphBuilder g(graph);
  const ScoreOperands in = score_operands(g, s, io);
  const auto& [scores, rows, q, kt] = in;
  constexpr cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const TensorDesc vt = g.io_tensor("V^T", kUidV, io, transposed(s.v));
  const TensorDesc o = g.io_tensor("O", kUidO, io, s.o);
  const TensorDesc d_o = g.io_tensor("dO", kUidDO, io, s.d_o);
  const TensorDesc lse = g.io_tensor("lse", kUidStats, f32, s.stats);
  const TensorDesc dq = g.io_tensor("dQ", kUidDQ, io, s.dq);
  const TensorDesc dk = g.io_tensor("dK", kUidDK, io, s.dk);
  const TensorDesc dv = g.io_tensor("dV", kUidDV, io, s.dv);
  const TensorDesc dq_accum = g.io_tensor("dQ accumulator", kUidDqAccum, f32, s.dq_accum);
  const TensorDesc row_dot = g.io_tensor("rowsum(dO * O)", kUidRowDot, f32, s.row_dot);
  const TensorDesc scale = g.scalar("scale", kUidScale);
  const TensorDesc one = g.scalar("1", kUidOne);

  // row_dot = rowsum(dO * O), the softmax-gradient correction, materialised (times 1) in scratch.
  const TensorDesc do_o = g.virtual_tensor("dO * O", f32, packed_view(s.batch, s.heads, s.q_rows, s.head_dim));
  g.binary("dO * O", CUDNN_POINTWISE_MUL, d_o, o, do_o);
  const TensorDesc do_o_sum = g.virtual_tensor("rowsum(dO * O)", f32, rows);
  g.reduction("rowsum(dO * O)", CUDNN_REDUCE_TENSOR_ADD, do_o, do_o_sum);
  g.binary("rowsum(dO * O) * 1", CUDNN_POINTWISE_MUL, do_o_sum, one, row_dot);

  // P = exp(scale * Q K^T - lse), causal or not: the forward's probabilities, recomputed.
  const TensorDesc scaled = scaled_scores(g, in, scale);
  const TensorDesc centered = g.virtual_tensor("scores - lse", f32, scores);
  g.binary("scores - lse", CUDNN_POINTWISE_SUB, scaled, lse, centered);
  const TensorDesc masked = masked_scores(g, s, centered, scores);
  const TensorDesc p = g.virtual_tensor("P", f32, scores);
  g.unary("P = exp(scores - lse)", CUDNN_POINTWISE_EXP, masked, p);

  // dV = P^T dO
  const TensorDesc pt = g.virtual_tensor("P^T", io, transposed(scores));
  g.reshape("P^T", p, pt);
  matmul_summed_over_groups(g, "dV = P^T dO", s, io, pt, d_o, dv);

  // dS = scale * P * (dO V^T - row_dot)
  const TensorDesc dp = g.virtual_tensor("dP = dO V^T", f32, scores);
  g.matmul("dP = dO V^T", d_o, vt, dp);
  const TensorDesc dp_centered = g.virtual_tensor("dP - row_dot", f32, scores);
  g.binary("dP - row_dot", CUDNN_POINTWISE_SUB, dp, row_dot, dp_centered);
  const TensorDesc ds_unscaled = g.virtual_tensor("P * (dP - row_dot)", f32, scores);
  g.binary("P * (dP - row_dot)", CUDNN_POINTWISE_MUL, dp_centered, p, ds_unscaled);
  const TensorDesc ds = g.virtual_tensor("dS", f32, scores);
  g.binary("dS = scale * P * (dP - row_dot)", CUDNN_POINTWISE_MUL, ds_unscaled, scale, ds);

  // dK = dS^T Q
  const TensorDesc dst = g.virtual_tensor("dS^T", io, transposed(scores));
  g.reshape("dS^T", ds, dst);
  matmul_summed_over_groups(g, "dK = dS^T Q", s, io, dst, q, dk);

  // dQ = dS K, accumulated in fp32 scratch, then cast into dqkv.
  const TensorDesc k = g.virtual_tensor("K", io, s.k);
  g.reshape("K = (K^T)^T", kt, k);
  g.matmul("dQ = dS K", ds, k, dq_accum);
  g.unary("dQ = cast(dQ accumulator)", CUDNN_POINTWISE_IDENTITY, dq_accum, dq);

  g.finish(target);
  return graph;
}

}  // namespace

AttentionGraph attention_forward_graph(const PlanTarget& target, const AttentionDims& a, cudnnDataType_t io) {
  return sdpa_forward_graph(target, whole_sequence_shape(a), io);
}
AttentionGraph attention_backward_graph(const PlanTarget& target, const AttentionDims& a, cudnnDataType_t io) {
  return sdpa_backward_graph(target, whole_sequence_shape(a), io);
}
AttentionGraph attention_block_forward_graph(const PlanTarget& target, const BlockAttentionDims& a,
                                             cudnnDataType_t io) {
  return sdpa_forward_graph(target, block_shape(a, SdpaPass::forward), io);
}
AttentionGraph attention_block_backward_graph(const PlanTarget& target, const BlockAttentionDims& a,
                                              cudnnDataType_t io) {
  return sdpa_backward_graph(target, block_shape(a, SdpaPass::backward), io);
}

CudnnDescriptor described_device(const std::string& json) {
  CudnnDescriptor device(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "described device");
  device.set_chars(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION), json).finalize();
  return device;
}

bool failed_only_at_module_load(const PlanRefusal& refusal) {
  // cuDNN reports the driver's error by number: "cuLibraryLoadData returned error (34)".
  return refusal.status == CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER &&
         (refusal.text.find("(34)") != std::string::npos ||
          refusal.text.find("CUDA_ERROR_STUB_LIBRARY") != std::string::npos);
}

std::string PlanSearch::summary() const {
  std::string text = "heuristics proposed " + std::to_string(proposed) + " engine configurations";
  for (const PlanRefusal& r : refusals) text += "; config " + std::to_string(r.config) + ": " + r.text;
  return text;
}

PlanSearch search_execution_plans(const AttentionGraph& graph, const PlanTarget& target) {
  CudnnDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics (mode A)");
  heuristics.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), graph.graph.get())
      .set_heur_mode(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_ENGINEHEUR_MODE), CUDNN_HEUR_MODE_A);
  if (target.device != nullptr)
    heuristics.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP), target.device);
  heuristics.finalize();

  PlanSearch search;
  const std::int64_t proposed = heuristics.descriptor_count(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_ENGINEHEUR_RESULTS));
  std::vector<CudnnDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < proposed; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config " + std::to_string(i));
    raw.push_back(configs.back().get());
  }
  // Heuristics drop the configurations that fail cuDNN's own support checks (the graph
  // pattern, the shape) before answering; CUDNN_LOGLEVEL_DBG=2 prints why.
  if (proposed > 0)
    search.proposed = heuristics.get_descriptors(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_ENGINEHEUR_RESULTS), raw);

  // Heuristics rank configurations without checking them all; the first that finalizes wins.
  for (std::int64_t i = 0; i < search.proposed; ++i) {
    const auto at = static_cast<std::size_t>(i);
    ExecutionPlan chosen;
    chosen.plan = CudnnDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan " + std::to_string(i));
    chosen.plan.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG), raw[at]);
    // The handle the plan will execute with (deprecated since 9.8, where execution names it
    // anyway; set for the versions before).
    if (target.handle != nullptr)
      chosen.plan.set_handle(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), target.handle);
    if (target.device != nullptr)
      chosen.plan.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP), target.device);
    const cudnnStatus_t status = chosen.plan.try_finalize();
    if (status == CUDNN_STATUS_SUCCESS) {
      chosen.workspace_bytes = chosen.plan.get_int64(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
      chosen.engine_config = std::move(configs[at]);
      search.plan = std::move(chosen);
      return search;
    }
    search.refusals.push_back({i, status, cudnn_status_text(status)});
    if (target.device != nullptr && failed_only_at_module_load(search.refusals.back())) {
      search.loadable_without_gpu = true;
      return search;
    }
  }
  return search;
}

ExecutionPlan make_execution_plan(const AttentionGraph& graph, const PlanTarget& target) {
  PlanSearch search = search_execution_plans(graph, target);
  if (!search.plan.has_value()) throw CudnnNotSupported("no execution plan: " + search.summary());
  return std::move(*search.plan);
}

}  // namespace ustrain::cuda
