// The CPU backend with train.precision = "fp8": bf16 everywhere (CpuMixedBackend), except the
// GEMMs of the linear layers added to fp8_layers(), which compute as an FP8 GEMM would: each
// operand quantised to FP8 with its recipe's scales and saturation (kernels/fp8/fp8_scaling.h),
// then the dequantised values multiplied with fp32 accumulation and the result rounded once
// into its bf16 tensor (a weight gradient accumulated into its fp32 tensor). Activations and
// weights are e4m3, gradients the configured format. A correctness model of FP8 training, not
// a fast path: every operand is quantised again at each call.
#pragma once

#include "kernels/cpu/cpu_mixed_backend.h"
#include "kernels/fp8/fp8_layers.h"

namespace ustrain {

class CpuFp8Backend : public CpuMixedBackend {
 public:
  CpuFp8Backend(int threads, const fp8::Config& config);

  fp8::Fp8Layers* fp8_layers() override { return &layers_; }

  void linear_forward(Tensor out, Tensor x, Tensor weight) override;
  void linear_backward_input(Tensor dx, Tensor dout, Tensor weight) override;
  void linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) override;

 private:
  // `t` (bf16) widened into `buffer` and quantised-dequantised in place as operand (rows,
  // cols) of `role`, scaled by `state` (delayed) or by the recipe's scales of its values.
  Tensor fp8_operand(ScratchBuffer& buffer, const Tensor& t, std::int64_t rows, std::int64_t cols, bool k_in_cols,
                     fp8::Role role, fp8::LayerScaling& state);

  fp8::Fp8Layers layers_;
  ScratchBuffer a_, b_, c_;
};

}  // namespace ustrain
