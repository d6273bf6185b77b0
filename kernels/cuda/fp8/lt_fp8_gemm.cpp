// LtFp8Gemm: FP8 GEMMs as cached cuBLASLt calls (see lt_fp8_gemm.h).
#include "kernels/cuda/fp8/lt_fp8_gemm.h"

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/gemm/lt_support.h"
#include "kernels/error.h"

namespace ustrain::cuda {
namespace {

cudaDataType_t lt_fp8_type(Fp8Format f) { return f == Fp8Format::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

const char* format_text(Fp8Format f) { return f == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }

std::int32_t lt_scale_mode(Fp8Grouping g) {
  switch (g) {
    case Fp8Grouping::tensor: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case Fp8Grouping::row: return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    case Fp8Grouping::vec128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case Fp8Grouping::blk128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

// The scale-mode pairs Hopper's cuBLASLt offers (lt_fp8_gemm.h).
bool groupings_combine(Fp8Grouping a, Fp8Grouping b) {
  const auto block = [](Fp8Grouping g) { return g == Fp8Grouping::vec128 || g == Fp8Grouping::blk128; };
  if (block(a) || block(b)) return block(a) && block(b) && !(a == Fp8Grouping::blk128 && b == Fp8Grouping::blk128);
  return a == b;
}

struct PlanKey {
  std::int64_t m, n, k;
  Fp8Format a_format, b_format;
  Fp8Grouping a_grouping, b_grouping;
  DType out_type;
  std::uint32_t align_a, align_b, align_c;

  bool operator<(const PlanKey& o) const {
    return std::tie(m, n, k, a_format, b_format, a_grouping, b_grouping, out_type, align_a, align_b, align_c) <
           std::tie(o.m, o.n, o.k, o.a_format, o.b_format, o.a_grouping, o.b_grouping, o.out_type, o.align_a,
                    o.align_b, o.align_c);
  }
  std::string text() const {
    return "FP8 GEMM (m=" + std::to_string(m) + ", n=" + std::to_string(n) + ", K=" + std::to_string(k) + ", A " +
           format_text(a_format) + "/" + fp8_grouping_name(a_grouping) + ", B " + format_text(b_format) + "/" +
           fp8_grouping_name(b_grouping) + ", output " + dtype_name(out_type) + ")";
  }
};

struct LtPlan : LtDescriptors {
  float beta = 0.0f;
};

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  USTRAIN_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

// The inverse scales change with every call; the descriptor holds their addresses.
void set_scale_pointers(cublasLtMatmulDesc_t desc, const Fp8GemmOperand& a, const Fp8GemmOperand& b) {
  set_desc(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(a.descale));
  set_desc(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(b.descale));
}

}  // namespace

struct LtFp8Gemm::Impl {
  LtHandle handle = make_lt_handle();
  std::map<PlanKey, std::unique_ptr<LtPlan>> plans;  // destroyed before the handle

  LtPlan& plan(const PlanKey& key, const Fp8GemmOperand& a, const Fp8GemmOperand& b);
};

// First call for a shape: descriptors (TN, FP8 types, scale modes) and the heuristic's algorithm.
LtPlan& LtFp8Gemm::Impl::plan(const PlanKey& key, const Fp8GemmOperand& a, const Fp8GemmOperand& b) {
  const auto found = plans.find(key);
  if (found != plans.end()) return *found->second;

  auto p = std::make_unique<LtPlan>();
  USTRAIN_LT_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<std::int32_t>(CUBLAS_OP_T));
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<std::int32_t>(CUBLAS_OP_N));
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<std::int8_t>(0));  // promote partial sums to fp32
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, lt_scale_mode(key.a_grouping));
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, lt_scale_mode(key.b_grouping));
  set_scale_pointers(p->desc, a, b);
  // A = a stored (K, m) column-major (row-major (m, K)), op(A) = A^T; B = b stored (K, n).
  p->a = make_layout(lt_fp8_type(key.a_format), key.k, key.m, key.k);
  p->b = make_layout(lt_fp8_type(key.b_format), key.k, key.n, key.k);
  p->c = make_layout(key.out_type == DType::f32 ? CUDA_R_32F : CUDA_R_16BF, key.m, key.n, key.m);
  p->beta = key.out_type == DType::f32 ? 1.0f : 0.0f;

  const LtPreference pref(kWorkspaceBytes, key.align_a, key.align_b, key.align_c, key.out_type != DType::f32);
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle.get(), p->desc, p->a, p->b, p->c, p->c, pref.get(),
                                                               1, &result, &found_count);
  USTRAIN_ASSERT(status == CUBLAS_STATUS_SUCCESS || status == CUBLAS_STATUS_NOT_SUPPORTED,
                 "cuBLASLt heuristic failed for " + key.text() + ": " + cublasLtGetStatusName(status));
  USTRAIN_ASSERT(status == CUBLAS_STATUS_SUCCESS && found_count > 0 && result.state == CUBLAS_STATUS_SUCCESS,
                 "no cuBLASLt algorithm for " + key.text() + " with operands aligned to " +
                     std::to_string(key.align_a) + "/" + std::to_string(key.align_b) + "/" +
                     std::to_string(key.align_c) + " bytes (A/B/C); FP8 GEMMs need Hopper (sm_90)");
  USTRAIN_ASSERT(result.workspaceSize <= kWorkspaceBytes,
                 "cuBLASLt algorithm for " + key.text() + " wants " + std::to_string(result.workspaceSize) +
                     " bytes of workspace");
  p->algo = result.algo;
  return *plans.emplace(key, std::move(p)).first->second;
}

LtFp8Gemm::LtFp8Gemm() : impl_(new Impl) {}

LtFp8Gemm::~LtFp8Gemm() { delete impl_; }

void LtFp8Gemm::run(void* out, DType out_type, const Fp8GemmOperand& a, const Fp8GemmOperand& b, std::int64_t k,
                    void* workspace, cudaStream_t stream) {
  const PlanKey key{a.rows, b.rows, k, a.format, b.format, a.grouping, b.grouping, out_type,
                    pointer_alignment(a.codes), pointer_alignment(b.codes), pointer_alignment(out)};
  USTRAIN_ASSERT(out_type == DType::bf16 || out_type == DType::f32, "unsupported output in " + key.text());
  USTRAIN_ASSERT(!(a.format == Fp8Format::e5m2 && b.format == Fp8Format::e5m2), "two e5m2 operands in " + key.text());
  USTRAIN_ASSERT(groupings_combine(a.grouping, b.grouping), "cuBLASLt has no such scale-mode pair: " + key.text());
  USTRAIN_ASSERT(key.m % 16 == 0 && key.n % 16 == 0 && key.k % 16 == 0,
                 "FP8 GEMM sizes must be multiples of 16: " + key.text());
  USTRAIN_ASSERT(a.codes != nullptr && b.codes != nullptr && out != nullptr && a.descale != nullptr &&
                     b.descale != nullptr && workspace != nullptr,
                 "null operand in " + key.text());
  if (key.m == 0 || key.n == 0) return;
  USTRAIN_ASSERT(key.k > 0, "empty reduction in " + key.text());
  LtPlan& p = impl_->plan(key, a, b);
  set_scale_pointers(p.desc, a, b);
  const float alpha = 1.0f;
  // C and D are the same buffer: beta = 0 overwrites it (bf16), beta = 1 accumulates (f32).
  USTRAIN_LT_CHECK(cublasLtMatmul(impl_->handle.get(), p.desc, &alpha, a.codes, p.a, b.codes, p.b, &p.beta, out, p.c, out,
                                  p.c, &p.algo, workspace, kWorkspaceBytes, stream));
}

}  // namespace ustrain::cuda
