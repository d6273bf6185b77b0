// What the cuBLASLt GEMM wrappers (lt_gemm.cpp, lt_fp8_gemm.cpp) share: a plan's descriptors,
// matrix layouts, the algorithm search's preferences, and pointer alignment. Include from .cpp
// files only (it includes cublasLt.h).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "kernels/cuda/gemm/lt_check.h"

namespace ustrain::cuda {

// An owned cuBLASLt handle. Declared before its owner's plans, it outlives their descriptors.
struct LtHandleDestroy {
  void operator()(cublasLtHandle_t handle) const { cublasLtDestroy(handle); }
};
using LtHandle = std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, LtHandleDestroy>;

inline LtHandle make_lt_handle() {
  cublasLtHandle_t handle = nullptr;
  USTRAIN_LT_CHECK(cublasLtCreate(&handle));
  return LtHandle(handle);
}

// A cached call's descriptor, its A, B and C (= D) layouts and the algorithm chosen for them.
struct LtDescriptors {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  LtDescriptors() = default;
  LtDescriptors(const LtDescriptors&) = delete;
  LtDescriptors& operator=(const LtDescriptors&) = delete;
  ~LtDescriptors() {  // destroy calls only fail on invalid handles; nothing to report from here
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

inline cublasLtMatrixLayout_t make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  USTRAIN_LT_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                              static_cast<std::uint64_t>(cols), ld));
  return layout;
}

// The largest power of two up to 256 dividing the address: the alignment cuBLASLt may assume.
inline std::uint32_t pointer_alignment(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// The algorithm search's limits: the workspace, the operands' alignments (C's for D too), and
// for a 16-bit output split-K partial sums kept in the compute type (no in-place reduction in
// the output).
class LtPreference {
 public:
  LtPreference(std::uint64_t workspace_bytes, std::uint32_t align_a, std::uint32_t align_b, std::uint32_t align_c,
               bool narrow_output) {
    USTRAIN_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref_));
    USTRAIN_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace_bytes, sizeof(workspace_bytes)));
    const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c},
    };
    for (const auto& [attr, bytes] : alignments)
      USTRAIN_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref_, attr, &bytes, sizeof(bytes)));
    if (narrow_output) {
      const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      USTRAIN_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                            &schemes, sizeof(schemes)));
    }
  }
  ~LtPreference() { cublasLtMatmulPreferenceDestroy(pref_); }
  LtPreference(const LtPreference&) = delete;
  LtPreference& operator=(const LtPreference&) = delete;
  cublasLtMatmulPreference_t get() const { return pref_; }

 private:
  cublasLtMatmulPreference_t pref_ = nullptr;
};

}  // namespace ustrain::cuda
