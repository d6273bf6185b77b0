// One GEMM shape's oneDNN matmul primitive, as Bf16Gemm (onednn_gemm.h) and the GEMM benchmark
// build it. Includes oneDNN's header: include from .cpp files only.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <string>

#include "kernels/cpu/onednn_gemm.h"

namespace ustrain::cpu {

struct MatmulPlan {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c;
  std::string implementation;  // oneDNN's name for it, e.g. "brg:avx512_core_bf16"
};

// Row-major views of op(A) (m, k) and op(B) (k, n) in `operands` (a transposed operand is the
// same memory read with swapped strides), C (m, n) in fp32, and a sum post-op when the GEMM
// accumulates.
inline MatmulPlan matmul_plan(const GemmShape& s, dnnl::memory::data_type operands, const dnnl::engine& engine) {
  using dnnl::memory;
  const memory::desc a({s.m, s.k}, operands, s.trans_a ? memory::dims{1, s.lda} : memory::dims{s.lda, 1});
  const memory::desc b({s.k, s.n}, operands, s.trans_b ? memory::dims{1, s.ldb} : memory::dims{s.ldb, 1});
  const memory::desc c({s.m, s.n}, memory::data_type::f32, memory::dims{s.ldc, 1});
  dnnl::primitive_attr attr;
  if (s.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
  return {dnnl::matmul(pd), a, b, c, pd.impl_info_str()};
}

}  // namespace ustrain::cpu
