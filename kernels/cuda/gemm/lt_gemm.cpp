// LtGemm: the linear layers' GEMMs as cached cuBLASLt calls (see lt_gemm.h, gemm_plan.h).
#include "kernels/cuda/gemm/lt_gemm.h"

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/gemm/cuda_data_type.h"
#include "kernels/cuda/gemm/gemm_plan.h"
#include "kernels/cuda/gemm/lt_support.h"
#include "kernels/error.h"

namespace ustrain::cuda {
namespace {

enum class LinearGemm : std::uint8_t { forward, backward_input, backward_weight };

const char* gemm_name(LinearGemm op) {
  switch (op) {
    case LinearGemm::forward: return "linear_forward";
    case LinearGemm::backward_input: return "linear_backward_input";
    case LinearGemm::backward_weight: return "linear_backward_weight";
  }
  return "linear";
}

bool is_float_type(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

std::string shape_text(LinearGemm op, std::int64_t N, std::int64_t I, std::int64_t O, DType act, DType c_type) {
  return std::string(gemm_name(op)) + " (N=" + std::to_string(N) + ", I=" + std::to_string(I) +
         ", O=" + std::to_string(O) + ", act " + dtype_name(act) + ", output " + dtype_name(c_type) + ")";
}

// Everything that selects an algorithm. Pointer alignments are part of it: an algorithm chosen
// for 256-byte aligned operands may not accept a row slice that starts mid-buffer.
struct PlanKey {
  LinearGemm op;
  std::int64_t N, I, O;
  DType act, c_type;
  std::uint32_t align_a, align_b, align_c;

  bool operator<(const PlanKey& o) const {
    return std::tie(op, N, I, O, act, c_type, align_a, align_b, align_c) <
           std::tie(o.op, o.N, o.I, o.O, o.act, o.c_type, o.align_a, o.align_b, o.align_c);
  }
};

// The descriptors and chosen algorithm of one GEMM shape; D shares C's layout (in place).
struct LtPlan : LtDescriptors {
  GemmCall call;
};

void set_transpose(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, bool trans) {
  const std::int32_t op = trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  USTRAIN_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &op, sizeof(op)));
}

}  // namespace

struct LtGemm::Impl {
  LtHandle handle = make_lt_handle();
  void* workspace = nullptr;  // the caller's (use_workspace) or `own`
  void* own = nullptr;
  std::map<PlanKey, std::unique_ptr<LtPlan>> plans;  // destroyed before the handle

  ~Impl() {
    if (own) cudaFree(own);  // waits for work still using it
  }

  const LtPlan& plan(const PlanKey& key, const GemmCall& call);
  void run(LinearGemm op, const GemmCall& call, const void* x, const void* w, const void* dout, void* c,
           DType c_type, std::int64_t N, std::int64_t I, std::int64_t O, DType act, cudaStream_t stream);
};

// First call for a shape: build the descriptors and ask the heuristic for its best algorithm.
const LtPlan& LtGemm::Impl::plan(const PlanKey& key, const GemmCall& call) {
  const auto found = plans.find(key);
  if (found != plans.end()) return *found->second;

  auto p = std::make_unique<LtPlan>();
  p->call = call;
  // fp32 accumulation and fp32 alpha/beta for every act type; for f32 inputs this is true fp32.
  USTRAIN_LT_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_transpose(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, call.trans_a);
  set_transpose(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, call.trans_b);
  const cudaDataType_t in_type = cuda_data_type(key.act, "cuBLASLt GEMM");
  p->a = make_layout(in_type, call.a_rows(), call.a_cols(), call.lda);
  p->b = make_layout(in_type, call.b_rows(), call.b_cols(), call.ldb);
  p->c = make_layout(cuda_data_type(key.c_type, "cuBLASLt GEMM"), call.m, call.n, call.ldc);

  const LtPreference pref(kWorkspaceBytes, key.align_a, key.align_b, key.align_c, key.c_type != DType::f32);
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle.get(), p->desc, p->a, p->b, p->c, p->c, pref.get(),
                                                               1, &result, &found_count);
  const std::string what = shape_text(key.op, key.N, key.I, key.O, key.act, key.c_type);
  USTRAIN_ASSERT(status == CUBLAS_STATUS_SUCCESS || status == CUBLAS_STATUS_NOT_SUPPORTED,
                 "cuBLASLt heuristic failed for " + what + ": " + cublasLtGetStatusName(status));
  USTRAIN_ASSERT(status == CUBLAS_STATUS_SUCCESS && found_count > 0 && result.state == CUBLAS_STATUS_SUCCESS,
                 "no cuBLASLt algorithm for " + what + " with operands aligned to " + std::to_string(key.align_a) +
                     "/" + std::to_string(key.align_b) + "/" + std::to_string(key.align_c) + " bytes (A/B/C)");
  USTRAIN_ASSERT(result.workspaceSize <= kWorkspaceBytes, "cuBLASLt algorithm for " + what + " wants " +
                                                              std::to_string(result.workspaceSize) +
                                                              " bytes of workspace");
  p->algo = result.algo;
  return *plans.emplace(key, std::move(p)).first->second;
}

void LtGemm::Impl::run(LinearGemm op, const GemmCall& call, const void* x, const void* w, const void* dout, void* c,
                       DType c_type, std::int64_t N, std::int64_t I, std::int64_t O, DType act, cudaStream_t stream) {
  const auto operand = [&](LinearOperand which) {
    switch (which) {
      case LinearOperand::x: return x;
      case LinearOperand::weight: return w;
      case LinearOperand::dout: return dout;
    }
    return x;
  };
  const void* a = operand(call.a);
  const void* b = operand(call.b);
  USTRAIN_ASSERT(a != nullptr && b != nullptr && c != nullptr,
                 "null operand in " + shape_text(op, N, I, O, act, c_type));
  const PlanKey key{op, N, I, O, act, c_type, pointer_alignment(a), pointer_alignment(b), pointer_alignment(c)};
  const LtPlan& p = plan(key, call);
  if (workspace == nullptr) workspace = own = device_malloc(kWorkspaceBytes, "the cuBLASLt workspace");
  // C and D are the same buffer: beta = 0 overwrites it, beta = 1 accumulates into it.
  USTRAIN_LT_CHECK(cublasLtMatmul(handle.get(), p.desc, &p.call.alpha, a, p.a, b, p.b, &p.call.beta, c, p.c, c, p.c,
                                  &p.algo, workspace, kWorkspaceBytes, stream));
}

namespace {

void check_args(LinearGemm op, std::int64_t N, std::int64_t I, std::int64_t O, DType act, DType c_type) {
  USTRAIN_ASSERT(N >= 0 && I >= 0 && O >= 0, "negative size in " + shape_text(op, N, I, O, act, c_type));
  USTRAIN_ASSERT(is_float_type(act), "unsupported activation dtype in " + shape_text(op, N, I, O, act, c_type));
  USTRAIN_ASSERT(c_type == act || c_type == DType::f32,
                 "output must be in the activation dtype or f32 in " + shape_text(op, N, I, O, act, c_type));
}

// An empty reduction (k = 0) yields zeros, as in the CPU backend. All-zero bits are 0.0 in
// every float type.
void zero_fill(void* c, std::int64_t rows, std::int64_t cols, DType type, cudaStream_t stream) {
  const std::size_t bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) * dtype_size(type);
  USTRAIN_CUDA_CHECK(cudaMemsetAsync(c, 0, bytes, stream));
}

}  // namespace

LtGemm::LtGemm() : impl_(new Impl) {}

void LtGemm::use_workspace(void* workspace) {
  impl_->workspace = workspace;
  if (workspace != nullptr && impl_->own != nullptr) {
    USTRAIN_CUDA_CHECK(cudaFree(impl_->own));  // synchronises the device: no queued GEMM still uses it
    impl_->own = nullptr;
  }
}

std::size_t LtGemm::own_workspace_bytes() const { return impl_->own != nullptr ? kWorkspaceBytes : 0; }

LtGemm::~LtGemm() { delete impl_; }

void LtGemm::linear_forward(void* out, DType out_type, const void* x, const void* w, std::int64_t N, std::int64_t I,
                            std::int64_t O, DType act, cudaStream_t stream) {
  check_args(LinearGemm::forward, N, I, O, act, out_type);
  if (N == 0 || O == 0) return;
  if (I == 0) return zero_fill(out, N, O, out_type, stream);  // out (N, O)
  impl_->run(LinearGemm::forward, plan_linear_forward(N, I, O), x, w, nullptr, out, out_type, N, I, O, act, stream);
}

void LtGemm::linear_backward_input(void* dx, const void* dout, const void* w, std::int64_t N, std::int64_t I,
                                   std::int64_t O, DType act, cudaStream_t stream) {
  check_args(LinearGemm::backward_input, N, I, O, act, act);
  if (N == 0 || I == 0) return;
  if (O == 0) return zero_fill(dx, N, I, act, stream);  // dx (N, I)
  impl_->run(LinearGemm::backward_input, plan_linear_backward_input(N, I, O), nullptr, w, dout, dx, act, N, I, O,
             act, stream);
}

void LtGemm::linear_backward_weight(void* dw, DType dw_type, const void* dout, const void* x, std::int64_t N,
                                    std::int64_t I, std::int64_t O, DType act, cudaStream_t stream) {
  check_args(LinearGemm::backward_weight, N, I, O, act, dw_type);
  if (N == 0 || I == 0 || O == 0) return;  // dw (O, I) += nothing
  impl_->run(LinearGemm::backward_weight, plan_linear_backward_weight(N, I, O), x, nullptr, dout, dw, dw_type, N, I,
             O, act, stream);
}

}  // namespace ustrain::cuda
