// GroupedGemm: the grouped linear ops' GEMMs as one cublasGemmGroupedBatchedEx call (see
// grouped_gemm.h).
#include "kernels/cuda/gemm/grouped_gemm.h"

#include <cublas_v2.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/gemm/cuda_data_type.h"
#include "kernels/error.h"

namespace ustrain::cuda {
namespace {

[[noreturn]] void fail_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
  ::ustrain::assertion_failed(expr, file, line,
                              std::string("cuBLAS error: ") + cublasGetStatusName(status) + " (" +
                                  std::to_string(static_cast<int>(status)) + ")");
}

#define USTRAIN_CUBLAS_CHECK(expr)                                                      \
  do {                                                                                  \
    const cublasStatus_t ustrain_status_ = (expr);                                      \
    if (ustrain_status_ != CUBLAS_STATUS_SUCCESS) fail_cublas(ustrain_status_, #expr, __FILE__, __LINE__); \
  } while (0)

cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

struct GroupedGemm::Impl {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;  // the handle's
  // The caller's workspace, once given (until then cuBLAS's own pool); null after it is taken back.
  bool workspace_given = false;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Device pointer arrays (kMaxProblems each) and the host array they are copied from.
  void** device_pointers = nullptr;  // [A..., B..., C...]
  std::vector<void*> host_pointers;
  // The per-group arguments cuBLAS reads on the host.
  std::vector<cublasOperation_t> trans_a, trans_b;
  std::vector<std::int64_t> m, n, k, lda, ldb, ldc, group_size;
  std::vector<float> alpha, beta;
};

GroupedGemm::GroupedGemm() : impl_(new Impl) {
  USTRAIN_CUBLAS_CHECK(cublasCreate(&impl_->handle));
  // Pointer mode host (the default): alpha and beta are read from host arrays.
  impl_->device_pointers =
      static_cast<void**>(device_malloc(3 * kMaxProblems * sizeof(void*), "the grouped GEMM's pointer arrays"));
  impl_->host_pointers.resize(3 * kMaxProblems);
}

GroupedGemm::~GroupedGemm() {
  if (impl_->handle != nullptr) cublasDestroy(impl_->handle);
  if (impl_->device_pointers != nullptr) cudaFree(impl_->device_pointers);
  delete impl_;
}

bool GroupedGemm::supports(DType ab, DType c, std::span<const GroupedProblem> problems) {
  const bool act = ab == DType::f32 || ab == DType::bf16 || ab == DType::f16;
  if (!act || c != ab || problems.size() > kMaxProblems) return false;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const auto whole_units = [&](std::int64_t ld) { return ld * static_cast<std::int64_t>(dtype_size(ab)) % 16 == 0; };
  for (const GroupedProblem& p : problems) {
    const GemmCall& g = p.call;
    if (g.m <= 0 || g.n <= 0 || g.k <= 0) return false;
    if (!aligned(p.a) || !aligned(p.b) || !aligned(p.c)) return false;
    if (!whole_units(g.lda) || !whole_units(g.ldb) || !whole_units(g.ldc)) return false;
  }
  return true;
}

void GroupedGemm::use_workspace(void* workspace, std::size_t bytes) {
  impl_->workspace_given = true;
  impl_->workspace = workspace;
  impl_->workspace_bytes = workspace != nullptr ? bytes : 0;
  USTRAIN_CUBLAS_CHECK(cublasSetWorkspace(impl_->handle, impl_->workspace, impl_->workspace_bytes));
}

std::size_t GroupedGemm::device_bytes() const { return 3 * kMaxProblems * sizeof(void*); }

void GroupedGemm::run(std::span<const GroupedProblem> problems, DType ab, DType c, cudaStream_t stream) {
  USTRAIN_ASSERT(supports(ab, c, problems),
                 std::string("cuBLAS grouped GEMM of ") + std::to_string(problems.size()) + " problems, A/B " +
                     dtype_name(ab) + ", C " + dtype_name(c) + ": types, sizes or alignment it does not take");
  if (problems.empty()) return;
  Impl& s = *impl_;
  const std::size_t g = problems.size();
  for (auto* v : {&s.m, &s.n, &s.k, &s.lda, &s.ldb, &s.ldc, &s.group_size}) v->resize(g);
  s.trans_a.resize(g), s.trans_b.resize(g), s.alpha.resize(g), s.beta.resize(g);
  for (std::size_t i = 0; i < g; ++i) {
    const GemmCall& call = problems[i].call;
    s.trans_a[i] = op(call.trans_a), s.trans_b[i] = op(call.trans_b);
    s.m[i] = call.m, s.n[i] = call.n, s.k[i] = call.k;
    s.lda[i] = call.lda, s.ldb[i] = call.ldb, s.ldc[i] = call.ldc;
    s.alpha[i] = call.alpha, s.beta[i] = call.beta;
    s.group_size[i] = 1;  // each GEMM its own group: their sizes differ
    s.host_pointers[i] = const_cast<void*>(problems[i].a);
    s.host_pointers[kMaxProblems + i] = const_cast<void*>(problems[i].b);
    s.host_pointers[2 * kMaxProblems + i] = problems[i].c;
  }
  // One copy of all three arrays (the unused tail of the first two goes along).
  const std::size_t bytes = (2 * kMaxProblems + g) * sizeof(void*);
  USTRAIN_CUDA_CHECK(cudaMemcpyAsync(s.device_pointers, s.host_pointers.data(), bytes, cudaMemcpyHostToDevice, stream));
  void* const* device_a = s.device_pointers;
  void* const* device_b = s.device_pointers + kMaxProblems;
  void* const* device_c = s.device_pointers + 2 * kMaxProblems;
  if (stream != s.stream) {
    // Setting the stream puts cuBLAS back on its own workspace pool: the caller's goes back in.
    USTRAIN_CUBLAS_CHECK(cublasSetStream(s.handle, stream));
    if (s.workspace_given) USTRAIN_CUBLAS_CHECK(cublasSetWorkspace(s.handle, s.workspace, s.workspace_bytes));
    s.stream = stream;
  }
  const cudaDataType_t ab_type = cuda_data_type(ab, "cuBLAS grouped GEMM"), c_type = cuda_data_type(c, "cuBLAS grouped GEMM");
  USTRAIN_CUBLAS_CHECK(cublasGemmGroupedBatchedEx_64(
      s.handle, s.trans_a.data(), s.trans_b.data(), s.m.data(), s.n.data(), s.k.data(), s.alpha.data(),
      const_cast<const void* const*>(device_a), ab_type, s.lda.data(), const_cast<const void* const*>(device_b),
      ab_type, s.ldb.data(), s.beta.data(), device_c, c_type, s.ldc.data(), static_cast<std::int64_t>(g),
      s.group_size.data(), CUBLAS_COMPUTE_32F));
}

}  // namespace ustrain::cuda
