// The GEMMs of the linear layers, through cuBLASLt.
//
// Row-major, weight (O, I) as Hugging Face stores it (kernels/backend.h); the mapping onto
// cuBLASLt's column-major calls is kernels/cuda/gemm/gemm_plan.h.
//
// Types: act is f32, bf16 or f16. A and B are in act; accumulation and alpha/beta are fp32
// (CUBLAS_COMPUTE_32F; for f32 that is true fp32, never TF32). C/D are in out_type/dw_type,
// which is act or f32.
//
// The constructor creates the cuBLASLt handle, so an LtGemm must only be constructed where a
// GPU exists (on the current device, which every later call must also use). Its 32 MiB
// workspace is the planned library workspace once use_workspace() gives it one
// (kernels/library_workspace.h); until then it allocates its own at the first call. The first call for a shape picks an algorithm with
// cuBLASLt's heuristic and caches it; later calls with that shape only look it up.
//
// Calls never synchronise. All calls share the one workspace, so calls on different streams
// must not overlap, and an LtGemm is not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/library_workspace.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

class LtGemm {
 public:
  static constexpr std::size_t kWorkspaceBytes = kCublasLtWorkspaceBytes;

  LtGemm();
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Runs the GEMMs in `workspace` (kWorkspaceBytes of device memory the caller owns), freeing
  // the one allocated here, if any; null goes back to allocating one at the next call. Work
  // already queued keeps the workspace it was given, so the caller frees its memory only
  // after synchronising.
  void use_workspace(void* workspace);
  // Device bytes of workspace allocated here (0 while the caller's is used).
  std::size_t own_workspace_bytes() const;

  // out (N, O) = x (N, I) @ w (O, I)^T, overwritten; out in out_type (act or f32).
  // I == 0 zero-fills out, as the CPU backend does.
  void linear_forward(void* out, DType out_type, const void* x, const void* w, std::int64_t N, std::int64_t I,
                      std::int64_t O, DType act, cudaStream_t stream);
  // dx (N, I) = dout (N, O) @ w (O, I), overwritten; dx in act. O == 0 zero-fills dx.
  void linear_backward_input(void* dx, const void* dout, const void* w, std::int64_t N, std::int64_t I,
                             std::int64_t O, DType act, cudaStream_t stream);
  // dw (O, I) += dout (N, O)^T @ x (N, I), accumulated in place; dw in dw_type (act or f32,
  // fp32 for parameter gradients). N == 0 leaves dw unchanged.
  void linear_backward_weight(void* dw, DType dw_type, const void* dout, const void* x, std::int64_t N,
                              std::int64_t I, std::int64_t O, DType act, cudaStream_t stream);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace ustrain::cuda
