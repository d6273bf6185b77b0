// GraphBuilder: a cuDNN operation graph (cudnn_attention_graph.h's AttentionGraph) built
// tensor by tensor and operation by operation, for the attention graphs of
// cudnn_attention_graph.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/attention/cudnn_attention_graph.h"

namespace ustrain::cuda {

using TensorDesc = cudnnBackendDescriptor_t;

class GraphBuilder {
 public:
  explicit GraphBuilder(AttentionGraph& out) : out_(out) {}

  // Memory the execution supplies; cuDNN may assume 16-byte alignment.
  TensorDesc io_tensor(const std::string& name, std::int64_t uid, cudnnDataType_t type, const StridedView& view) {
    out_.uids.push_back(uid);
    return tensor(name, uid, type, view, /*is_virtual=*/false, /*by_value=*/false);
  }
  // An fp32 scalar read from host memory at execution.
  TensorDesc scalar(const std::string& name, std::int64_t uid) {
    out_.uids.push_back(uid);
    return tensor(name, uid, CUDNN_DATA_FLOAT, packed_view(1, 1, 1, 1), false, /*by_value=*/true);
  }
  // An intermediate that exists only inside the fused kernel (its strides are nominal).
  TensorDesc virtual_tensor(const std::string& name, cudnnDataType_t type, const StridedView& view) {
    return tensor(name, next_virtual_uid_++, type, view, /*is_virtual=*/true, false);
  }

  // c = a b over the last two dimensions, batched over the first two (broadcast where a
  // kv-head dimension meets a query-head one: query head h reads kv head h / (H / Hkv)).
  void matmul(const std::string& name, TensorDesc a, TensorDesc b, TensorDesc c) {
    CudnnDescriptor desc(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul " + name);
    desc.set_data_type(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_MATMUL_COMP_TYPE), CUDNN_DATA_FLOAT).finalize();
    CudnnDescriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "op " + name);
    op.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_ADESC), a)
        .set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_BDESC), b)
        .set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_CDESC), c)
        .set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_MATMUL_DESC), desc.get())
        .finalize();
    keep(std::move(desc));
    add_op(std::move(op));
  }

  void unary(const std::string& name, cudnnPointwiseMode_t mode, TensorDesc x, TensorDesc y) {
    pointwise(name, mode, CUDNN_DATA_FLOAT, x, nullptr, nullptr, y);
  }
  void binary(const std::string& name, cudnnPointwiseMode_t mode, TensorDesc x, TensorDesc b, TensorDesc y) {
    pointwise(name, mode, CUDNN_DATA_FLOAT, x, b, nullptr, y);
  }

  // Masks x (b, h, s_q, s_kv) to the causal triangle (key j <= query i) with -inf.
  TensorDesc causal_mask(const std::string& name, TensorDesc x, TensorDesc neg_inf, const StridedView& scores) {
    const ScoreIndices at = score_indices(name, x, scores);
    const TensorDesc keep_it = virtual_tensor(name + " row >= column", CUDNN_DATA_BOOLEAN, scores);
    pointwise(name + " row >= column", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, at.row, at.col, nullptr, keep_it);
    return kept_or_neg_inf(name, x, neg_inf, keep_it, scores);
  }

  // Masks x (b, h, s_q, s_kv) to a sliding window of `window` keys (a by-value fp32 scalar):
  // column + window > row, else -inf; after the causal mask, the pattern cuDNN's frontend
  // spells a top-left diagonal band in for cuDNN before 9.21.
  TensorDesc window_mask(const std::string& name, TensorDesc x, TensorDesc neg_inf, TensorDesc window,
                         const StridedView& scores) {
    const ScoreIndices at = score_indices(name, x, scores);
    const TensorDesc reach = virtual_tensor(name + " column + window", CUDNN_DATA_FLOAT, scores);
    const TensorDesc keep_it = virtual_tensor(name + " column + window > row", CUDNN_DATA_BOOLEAN, scores);
    pointwise(name + " column + window", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, at.col, window, nullptr, reach);
    pointwise(name + " column + window > row", CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, reach, at.row, nullptr,
              keep_it);
    return kept_or_neg_inf(name, x, neg_inf, keep_it, scores);
  }

  void reduction(const std::string& name, cudnnReduceTensorOp_t reduce, TensorDesc x, TensorDesc y) {
    CudnnDescriptor desc(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction " + name);
    desc.set_data_type(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_REDUCTION_COMP_TYPE), CUDNN_DATA_FLOAT)
        .set_reduction_op(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_REDUCTION_OPERATOR), reduce)
        .finalize();
    CudnnDescriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "op " + name);
    op.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_DESC), desc.get())
        .set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_XDESC), x)
        .set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_YDESC), y)
        .finalize();
    keep(std::move(desc));
    add_op(std::move(op));
  }

  // y views x's elements with other dims/strides (and may convert the dtype).
  void reshape(const std::string& name, TensorDesc x, TensorDesc y) {
    CudnnDescriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "op " + name);
    op.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_RESHAPE_XDESC), x)
        .set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_RESHAPE_YDESC), y)
        .finalize();
    add_op(std::move(op));
  }

  void finish(const PlanTarget& target) {
    CudnnDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    graph.set_descriptors(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS), ops_);
    // Optional since cuDNN 9.8 (and deprecated), required before: a described device has none.
    if (target.handle != nullptr)
      graph.set_handle(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), target.handle);
    graph.finalize();
    out_.graph = std::move(graph);
  }

 private:
  TensorDesc tensor(const std::string& name, std::int64_t uid, cudnnDataType_t type, const StridedView& view,
                bool is_virtual, bool by_value) {
    CudnnDescriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
    t.set_data_type(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE), type)
        .set_int64s(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), view.dims.data(), 4)
        .set_int64s(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_TENSOR_STRIDES), view.strides.data(), 4)
        .set_int64(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), uid)
        .set_int64(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), 16)
        .set_bool(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_TENSOR_IS_VIRTUAL), is_virtual);
    if (by_value) t.set_bool(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_TENSOR_IS_BY_VALUE), true);
    t.finalize();
    return keep(std::move(t));
  }

  // y = mode(x[, b[, t]]), computed in `math`; `axis` only for GEN_INDEX.
  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t math, TensorDesc x, TensorDesc b,
                 TensorDesc t, TensorDesc y, std::int64_t axis = -1) {
    CudnnDescriptor desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise " + name);
    desc.set_pointwise_mode(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_POINTWISE_MODE), mode)
        .set_data_type(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_POINTWISE_MATH_PREC), math);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) desc.set_int64(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_POINTWISE_AXIS), axis);
    desc.finalize();
    CudnnDescriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "op " + name);
    op.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), desc.get())
        .set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_XDESC), x)
        .set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_YDESC), y);
    if (b != nullptr) op.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_BDESC), b);
    if (t != nullptr) op.set_descriptor(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_TDESC), t);
    op.set_float(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1), 1.0f)
        .set_float(USTRAIN_CUDNN_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2), 1.0f)
        .finalize();
    keep(std::move(desc));
    add_op(std::move(op));
  }

  // The query (row) and key (column) index of each element of x (b, h, s_q, s_kv), the masks'
  // operands.
  struct ScoreIndices {
    TensorDesc row, col;
  };
  ScoreIndices score_indices(const std::string& name, TensorDesc x, const StridedView& scores) {
    const TensorDesc row = virtual_tensor(name + " row index", CUDNN_DATA_INT32, scores);
    const TensorDesc col = virtual_tensor(name + " column index", CUDNN_DATA_INT32, scores);
    pointwise(name + " row index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, nullptr, nullptr, row, 2);
    pointwise(name + " column index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, nullptr, nullptr, col, 3);
    return {row, col};
  }

  // y = keep_it ? x : -inf.
  TensorDesc kept_or_neg_inf(const std::string& name, TensorDesc x, TensorDesc neg_inf, TensorDesc keep_it,
                             const StridedView& scores) {
    const TensorDesc y = virtual_tensor(name + " masked", CUDNN_DATA_FLOAT, scores);
    pointwise(name + " select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, neg_inf, keep_it, y);
    return y;
  }

  TensorDesc keep(CudnnDescriptor&& d) {
    out_.parts.push_back(std::move(d));
    return out_.parts.back().get();
  }
  void add_op(CudnnDescriptor&& op) { ops_.push_back(keep(std::move(op))); }

  AttentionGraph& out_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::int64_t next_virtual_uid_ = kFirstVirtualUid;
};

}  // namespace ustrain::cuda
