// Fp8Linear: quantise the operands, then one cuBLASLt FP8 GEMM (see fp8_linear.h).
#include "kernels/cuda/fp8/fp8_linear.h"

#include <string>

#include "kernels/cuda/fp8/fp8_quantize.h"
#include "kernels/cuda/fp8/lt_fp8_gemm.h"
#include "kernels/error.h"

namespace ustrain::cuda {

struct Fp8Linear::Operand {
  Fp8OperandShape shape;
  Fp8Format format = Fp8Format::e4m3;
  Fp8QuantizeBuffers buffers;
};

namespace {

Fp8Format device_format(fp8::Format f) { return f == fp8::Format::e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2; }

void check_sizes(const char* what, std::int64_t n, std::int64_t in, std::int64_t outs) {
  USTRAIN_ASSERT(n % 16 == 0 && in % 16 == 0 && outs % 16 == 0 && n > 0 && in > 0 && outs > 0,
                 std::string("FP8 ") + what + ": N, I and O must be positive multiples of 16 (N=" + std::to_string(n) +
                     ", I=" + std::to_string(in) + ", O=" + std::to_string(outs) + ")");
}

}  // namespace

Fp8Linear::Operand Fp8Linear::quantize(const void* src, std::int64_t rows, std::int64_t cols, bool transpose,
                                       fp8::Role role, const Fp8DeviceScaling& state, unsigned char*& at,
                                       cudaStream_t stream) const {
  const bool delayed = config_.recipe == fp8::Recipe::delayed;
  USTRAIN_ASSERT(!delayed || (state.scales != nullptr && state.amaxes != nullptr),
                 "FP8 delayed scaling without its device scales and amaxes");
  Operand op;
  op.shape = fp8_operand_shape(rows, cols, transpose, fp8_grouping(config_.recipe, role));
  op.format = device_format(fp8::format_of(config_, role));
  const Fp8OperandShape& s = op.shape;
  op.buffers.codes = at;
  at += round_up_scratch(static_cast<std::size_t>(s.outer * s.k));
  op.buffers.amax = reinterpret_cast<float*>(at);
  at += fp8_float_scratch(s.groups());
  op.buffers.scale = reinterpret_cast<float*>(at);
  at += fp8_float_scratch(s.groups());
  op.buffers.descale = reinterpret_cast<float*>(at);
  at += fp8_float_scratch(s.lt_floats());
  const auto r = static_cast<int>(role);
  const Fp8QuantizeScaling scaling{op.format, config_.margin, !delayed && config_.recipe != fp8::Recipe::current,
                                   delayed ? state.scales + r : nullptr, delayed ? state.amaxes + r : nullptr};
  fp8_quantize({src, rows, cols, transpose, s.grouping}, scaling, op.buffers, stream);
  return op;
}

void Fp8Linear::gemm(void* out, DType out_type, const Operand& a, const Operand& b, void* workspace,
                     cudaStream_t stream) {
  USTRAIN_ASSERT(a.shape.k == b.shape.k, "FP8 GEMM operands disagree on K");
  gemm_->run(out, out_type, {a.buffers.codes, a.shape.outer, a.format, a.shape.grouping, a.buffers.descale},
             {b.buffers.codes, b.shape.outer, b.format, b.shape.grouping, b.buffers.descale}, a.shape.k, workspace,
             stream);
}

void Fp8Linear::forward(void* out, const void* x, const void* w, std::int64_t n, std::int64_t in, std::int64_t outs,
                        const Fp8DeviceScaling& state, void* scratch, void* workspace, cudaStream_t stream) {
  check_sizes("linear_forward", n, in, outs);
  auto* at = static_cast<unsigned char*>(scratch);
  const Operand qw = quantize(w, outs, in, false, fp8::Role::weight, state, at, stream);    // (O, I)
  const Operand qx = quantize(x, n, in, false, fp8::Role::activation, state, at, stream);  // (N, I)
  gemm(out, DType::bf16, qw, qx, workspace, stream);  // out (N, O) = x @ W^T
}

void Fp8Linear::backward_input(void* dx, const void* dout, const void* w, std::int64_t n, std::int64_t in,
                               std::int64_t outs, const Fp8DeviceScaling& state, void* scratch, void* workspace,
                               cudaStream_t stream) {
  check_sizes("linear_backward_input", n, in, outs);
  auto* at = static_cast<unsigned char*>(scratch);
  const Operand qwt = quantize(w, outs, in, true, fp8::Role::weight, state, at, stream);     // W^T (I, O)
  const Operand qd = quantize(dout, n, outs, false, fp8::Role::gradient, state, at, stream);  // (N, O)
  gemm(dx, DType::bf16, qwt, qd, workspace, stream);  // dx (N, I) = dout @ (W^T)^T
}

void Fp8Linear::backward_weight(float* dw, const void* dout, const void* x, std::int64_t n, std::int64_t in,
                                std::int64_t outs, const Fp8DeviceScaling& state, void* scratch, void* workspace,
                                cudaStream_t stream) {
  check_sizes("linear_backward_weight", n, in, outs);
  auto* at = static_cast<unsigned char*>(scratch);
  const Operand qxt = quantize(x, n, in, true, fp8::Role::activation, state, at, stream);    // x^T (I, N)
  const Operand qdt = quantize(dout, n, outs, true, fp8::Role::gradient, state, at, stream);  // dout^T (O, N)
  gemm(dw, DType::f32, qxt, qdt, workspace, stream);  // dW (O, I) += dout^T @ (x^T)^T
}

}  // namespace ustrain::cuda
