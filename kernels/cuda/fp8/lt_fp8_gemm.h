// FP8 GEMMs through cuBLASLt (Hopper, sm_90): FP8 operands, fp32 accumulation
// (CUBLAS_COMPUTE_32F, fast accumulation off, so partial sums are promoted to fp32), and a
// bf16 result or an fp32 result accumulated in place (beta = 1), as the weight gradients need.
//
// Both operands are K-major (the "TN" layout Hopper's FP8 GEMMs require): row-major (rows, K)
// matrices of FP8 codes, as kernels/cuda/fp8/fp8_quantize.h writes them, each with its inverse
// scales in cuBLASLt's layout for its grouping (kernels/cuda/fp8/fp8_operand_layout.h):
//   out (n, m) row-major = b (n, K) @ a (m, K)^T,
// every product scaled by its groups' inverse scales. In cuBLASLt's column-major terms that
// is D (m, n) = op(A) (m, K) @ B (K, n) with A = `a` stored (K, m) and transposed, B = `b`
// stored (K, n), C = D = out with leading dimension m.
// The linear layers map onto it as
//   forward          out (N, O)  = x (N, I) @ W (O, I)^T        a = W,   b = x
//   input gradient   dx (N, I)   = dout (N, O) @ W^T (I, O)^T   a = W^T, b = dout
//   weight gradient  dW (O, I)  += dout^T (O, N) @ x^T (I, N)^T a = x^T, b = dout^T
//
// Supported (cuBLAS documentation, cublasLtMatmul and its scaling modes): A/B types e4m3 x
// e4m3, e4m3 x e5m2 and e5m2 x e4m3 (never two e5m2); groupings tensor x tensor, row x row,
// and vec128/blk128 pairs other than blk128 x blk128; m, n and K multiples of 16 (16-byte
// aligned FP8 rows; the block modes need m and n multiples of 4). Anything else is an
// internal error naming the call: the recipe check keeps such runs off the GPU.
//
// Like LtGemm: construct only where a GPU exists; the first call for a shape asks cuBLASLt's
// heuristic and caches the algorithm; calls never synchronise; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/fp8/fp8_operand_layout.h"
#include "kernels/library_workspace.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

struct Fp8GemmOperand {
  const void* codes = nullptr;  // (rows, K) FP8 codes, row-major
  std::int64_t rows = 0;
  Fp8Format format = Fp8Format::e4m3;
  Fp8Grouping grouping = Fp8Grouping::tensor;
  const float* descale = nullptr;  // device, cuBLASLt's layout for `grouping`
};

class LtFp8Gemm {
 public:
  static constexpr std::size_t kWorkspaceBytes = kCublasLtWorkspaceBytes;

  LtFp8Gemm();
  ~LtFp8Gemm();
  LtFp8Gemm(const LtFp8Gemm&) = delete;
  LtFp8Gemm& operator=(const LtFp8Gemm&) = delete;

  // out (b.rows, a.rows) = b @ a^T over K: overwritten when out_type is bf16, accumulated
  // into (out += ...) when it is f32. `workspace`: kWorkspaceBytes of device memory,
  // 256-byte aligned, that no GEMM on another stream uses at the same time.
  void run(void* out, DType out_type, const Fp8GemmOperand& a, const Fp8GemmOperand& b, std::int64_t k,
           void* workspace, cudaStream_t stream);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace ustrain::cuda
