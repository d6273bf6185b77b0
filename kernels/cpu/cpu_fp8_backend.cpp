#include "kernels/cpu/cpu_fp8_backend.h"

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/scoped_omp_threads.h"
#include "kernels/fp8/fp8_gemm_applies.h"

namespace ustrain {

CpuFp8Backend::CpuFp8Backend(int threads, const fp8::Config& config) : CpuMixedBackend(threads), layers_(config) {}

Tensor CpuFp8Backend::fp8_operand(ScratchBuffer& buffer, const Tensor& t, std::int64_t rows, std::int64_t cols,
                                  bool k_in_cols, fp8::Role role, fp8::LayerScaling& state) {
  const fp8::Config& c = layers_.config();
  float* wide = buffer.as<float>(static_cast<std::size_t>(rows * cols));
  cpu::widen(wide, t.data, t.dtype, rows * cols, threads());
  const cpu::ScopedOmpThreads team(threads());  // the scaling code takes OpenMP's default team
  const fp8::Operand op{wide, rows, cols, k_in_cols, role};
  fp8::ScaleGrid grid;
  if (c.recipe == fp8::Recipe::delayed) {
    grid = fp8::tensor_scale(op, state.scale(role));
    state.record(role, fp8::block_amax(op, grid)[0]);
  } else {
    grid = fp8::scales_now(c, op);
  }
  fp8::quantize_dequantize(wide, op, grid, fp8::format_of(c, role));
  return Tensor(wide, Shape{rows, cols}, DType::f32);
}

void CpuFp8Backend::linear_forward(Tensor out, Tensor x, Tensor weight) {
  fp8::LayerScaling* state = layers_.find(weight.data);
  if (!fp8::fp8_gemm_applies(state != nullptr, out, DType::bf16, x, weight, weight))
    return CpuMixedBackend::linear_forward(out, x, weight);
  const std::int64_t rows = x.shape.rows(), in = x.shape.last(), outs = weight.shape[0];
  // (N, O) = q(x) (N, I) @ q(W) (O, I)^T, both quantised along I
  const Tensor qx = fp8_operand(a_, x, rows, in, true, fp8::Role::activation, *state);
  const Tensor qw = fp8_operand(b_, weight, outs, in, true, fp8::Role::weight, *state);
  const Tensor wide(c_.as<float>(static_cast<std::size_t>(out.numel())), out.shape, DType::f32);
  CpuBackend::linear_forward(wide, qx, qw);
  cpu::narrow(out.data, out.dtype, wide.f32(), out.numel(), threads());
}

void CpuFp8Backend::linear_backward_input(Tensor dx, Tensor dout, Tensor weight) {
  fp8::LayerScaling* state = layers_.find(weight.data);
  if (!fp8::fp8_gemm_applies(state != nullptr, dx, DType::bf16, dout, weight, weight))
    return CpuMixedBackend::linear_backward_input(dx, dout, weight);
  const std::int64_t rows = dout.shape.rows(), outs = weight.shape[0], in = weight.shape[1];
  // (N, I) = q(dout) (N, O) @ q(W) (O, I), both quantised along O
  const Tensor qd = fp8_operand(a_, dout, rows, outs, true, fp8::Role::gradient, *state);
  const Tensor qw = fp8_operand(b_, weight, outs, in, false, fp8::Role::weight, *state);
  const Tensor wide(c_.as<float>(static_cast<std::size_t>(dx.numel())), dx.shape, DType::f32);
  CpuBackend::linear_backward_input(wide, qd, qw);
  cpu::narrow(dx.data, dx.dtype, wide.f32(), dx.numel(), threads());
}

void CpuFp8Backend::linear_backward_weight(Tensor dweight, Tensor dout, Tensor x) {
  fp8::LayerScaling* state = layers_.find(dweight.data);
  if (!fp8::fp8_gemm_applies(state != nullptr, dweight, DType::f32, dout, x, dweight))
    return CpuMixedBackend::linear_backward_weight(dweight, dout, x);
  const std::int64_t rows = x.shape.rows(), in = x.shape.last(), outs = dout.shape.last();
  // (O, I) += q(dout) (N, O)^T @ q(x) (N, I), both quantised along N
  const Tensor qd = fp8_operand(a_, dout, rows, outs, false, fp8::Role::gradient, *state);
  const Tensor qx = fp8_operand(b_, x, rows, in, false, fp8::Role::activation, *state);
  CpuBackend::linear_backward_weight(dweight, qd, qx);
}

}  // namespace ustrain
