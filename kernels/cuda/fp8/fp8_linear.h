// The three GEMMs of an FP8 linear layer on CUDA, as CpuFp8Backend computes them on the host
// (kernels/cpu/cpu_fp8_backend.h): each bf16 operand quantised to FP8 with its recipe's scales
// (kernels/cuda/fp8/fp8_quantize.h), then one cuBLASLt FP8 GEMM (kernels/cuda/fp8/lt_fp8_gemm.h):
//   forward          out (N, O) bf16  = q(x) (N, I) @ q(W) (O, I)^T        quantised along I
//   input gradient   dx (N, I) bf16   = q(dout) (N, O) @ q(W) (O, I)       quantised along O
//   weight gradient  dW (O, I) fp32  += q(dout)^T (O, N) @ q(x) (N, I)     quantised along N
// The GEMMs take both operands K-major, so the input gradient quantises W transposed and the
// weight gradient x and dout transposed.
//
// Groupings per recipe: fp8_grouping() (kernels/cuda/fp8/fp8_scratch_sizes.h).
// Delayed scaling takes its three scales (activation, weight, gradient) from device memory and
// max-es each operand's amax into three device floats: the caller uploads a step's scales
// once and reads the amaxes once per step, so no GEMM waits for the host.
//
// N, I and O must be multiples of 16 (lt_fp8_gemm.h). The quantised operands take
// fp8_linear_scratch_bytes() (kernels/cuda/fp8/fp8_scratch_sizes.h) of device scratch, which the caller owns; work is queued on
// `stream` and never synchronised.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/fp8/fp8_scratch_sizes.h"
#include "kernels/fp8/fp8_scaling.h"
#include "kernels/tensor.h"

namespace ustrain::cuda {

class LtFp8Gemm;

// Device state of a delayed-scaling GEMM key: kRoles scales (read) and kRoles amaxes (max-ed).
struct Fp8DeviceScaling {
  const float* scales = nullptr;
  float* amaxes = nullptr;
};

class Fp8Linear {
 public:
  Fp8Linear(const fp8::Config& config, LtFp8Gemm& gemm) : config_(config), gemm_(&gemm) {}

  // Each call: the bf16 tensors named above, (N, I, O), the key's delayed state (ignored by
  // the other recipes), fp8_linear_scratch_bytes() of `scratch`, the GEMM workspace.
  void forward(void* out, const void* x, const void* w, std::int64_t n, std::int64_t in, std::int64_t outs,
               const Fp8DeviceScaling& state, void* scratch, void* workspace, cudaStream_t stream);
  void backward_input(void* dx, const void* dout, const void* w, std::int64_t n, std::int64_t in, std::int64_t outs,
                      const Fp8DeviceScaling& state, void* scratch, void* workspace, cudaStream_t stream);
  void backward_weight(float* dw, const void* dout, const void* x, std::int64_t n, std::int64_t in,
                       std::int64_t outs, const Fp8DeviceScaling& state, void* scratch, void* workspace,
                       cudaStream_t stream);

 private:
  struct Operand;
  // Quantises src (rows, cols) bf16, transposed or not, as `role`, into scratch at `at`.
  Operand quantize(const void* src, std::int64_t rows, std::int64_t cols, bool transpose, fp8::Role role,
                   const Fp8DeviceScaling& state, unsigned char*& at, cudaStream_t stream) const;
  void gemm(void* out, DType out_type, const Operand& a, const Operand& b, void* workspace, cudaStream_t stream);

  fp8::Config config_;
  LtFp8Gemm* gemm_;
};

}  // namespace ustrain::cuda
