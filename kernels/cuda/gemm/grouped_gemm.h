// The grouped linear ops' GEMMs (kernels/backend.h) as one cuBLAS grouped GEMM
// (cublasGemmGroupedBatchedEx): every group's GEMM, each of its own size, in one call.
//
// Each group is issued as the column-major call kernels/cuda/gemm/gemm_plan.h maps its row-major
// GEMM to, as its own cuBLAS group of one problem (sizes differ from group to group). Types:
// A and B in act (f32, bf16 or f16), C in the same type, fp32 compute (CUBLAS_COMPUTE_32F;
// for f32 true fp32, never TF32) and fp32 alpha/beta. cuBLAS's grouped GEMM takes no other
// combination, so a C in fp32 from 16-bit A and B (parameter gradients of bf16 layers) is not
// offered here (supports() says so) and the backend runs those GEMMs one by one.
//
// Memory: cuBLAS reads the problems' A, B and C pointers from device memory: three arrays of
// kMaxProblems pointers allocated once here, outside any step. Each call writes its pointers
// into them with one copy on the compute stream from a host array kept here: the copy from
// pageable memory has read the host array when it returns, and stream order keeps the next
// call's copy behind this call's GEMMs, so neither array is overwritten while still in use.
// cuBLAS works in the planned library workspace once use_workspace() gives it one (shared
// with cuBLASLt's GEMMs: both run on the one compute stream, one at a time).
//
// The constructor creates the cuBLAS handle, so a GroupedGemm must only be constructed where a
// GPU exists (on the current device). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/cuda/gemm/gemm_plan.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

// One group's GEMM: the column-major call and its operands, C overwritten or accumulated by
// call.beta.
struct GroupedProblem {
  GemmCall call;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
};

class GroupedGemm {
 public:
  // The most GEMMs one call takes (a mixture of experts' local experts per pass).
  static constexpr std::size_t kMaxProblems = 1024;

  GroupedGemm();
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  // cuBLAS's grouped GEMM takes A and B in `ab` with C in `c` (see above), for these GEMMs:
  // at most kMaxProblems, every operand 16-byte aligned with leading dimensions of whole 16-byte
  // units (cuBLAS's alignment rule for 16-bit grouped GEMMs, kept for every type), m, n, k > 0.
  static bool supports(DType ab, DType c, std::span<const GroupedProblem> problems);
  // cuBLAS works in `workspace` (`bytes` of device memory the caller owns); null takes it back
  // (cuBLAS then works without one). Work already queued keeps the workspace it was given.
  void use_workspace(void* workspace, std::size_t bytes);
  // Device bytes held here: the pointer arrays.
  std::size_t device_bytes() const;

  // Queues every problem on `stream` as one grouped GEMM; supports(ab, c, problems) must hold.
  void run(std::span<const GroupedProblem> problems, DType ab, DType c, cudaStream_t stream);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace ustrain::cuda
