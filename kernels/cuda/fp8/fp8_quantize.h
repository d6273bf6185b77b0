// Quantising a bf16 matrix into an FP8 GEMM operand on the GPU, as kernels/fp8/fp8_scaling.h
// does on the host: q = encode(x * scale) in the operand's format, saturating, round to
// nearest even, bit for bit fp8::encode(format, x * scale, true) (NaN -> 0x7f).
//
// The source is a row-major bf16 (rows, cols) matrix; the operand is the K-major (outer, K)
// matrix the GEMM takes (kernels/cuda/fp8/fp8_operand_layout.h): the source itself (outer = rows,
// K = cols) or, with `transpose`, its transpose (outer = cols, K = rows), which the backward
// GEMMs need because Hopper's FP8 GEMMs take both operands K-major.
//
// Scales, per group of the operand's grouping:
//   given_scale (delayed scaling): the one tensor scale, read on the device from given_scale;
//   otherwise from the group's amax: scale_for_amax(amax, format, margin, 1), rounded down to a
//   power of two when power_of_two (rowwise, blockwise); computed on the device, no host
//   round trip.
// Amaxes ignore NaN, as fp8::block_amax does. With record_amax (delayed scaling) the tensor's
// amax is max-ed into *record_amax, the step's running amax of that operand.
//
// Outputs (device memory the caller owns, `Fp8QuantizeBuffers`): the codes (outer * K bytes),
// the natural grid's amaxes and scales (groups() floats each) and the inverse scales in
// cuBLASLt's layout (lt_floats() floats, which the GEMM multiplies by). Everything runs on
// `stream`, without synchronising.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/fp8/fp8_operand_layout.h"

namespace ustrain::cuda {

struct Fp8QuantizeSource {
  const void* data = nullptr;  // bf16 (rows, cols), row-major
  std::int64_t rows = 0, cols = 0;
  bool transpose = false;  // the operand is the transpose: K runs down the source's rows
  Fp8Grouping grouping = Fp8Grouping::tensor;
  Fp8OperandShape shape() const { return {transpose ? cols : rows, transpose ? rows : cols, grouping}; }
};

struct Fp8QuantizeScaling {
  Fp8Format format = Fp8Format::e4m3;
  int margin = 0;
  bool power_of_two = false;
  const float* given_scale = nullptr;  // device; the tensor scale (delayed), or null
  float* record_amax = nullptr;        // device; the step's running amax (delayed), or null
};

struct Fp8QuantizeBuffers {
  std::uint8_t* codes = nullptr;  // (outer, K)
  float* amax = nullptr;          // groups()
  float* scale = nullptr;         // groups()
  float* descale = nullptr;       // lt_floats(), cuBLASLt's layout
};

void fp8_quantize(const Fp8QuantizeSource& src, const Fp8QuantizeScaling& scaling, const Fp8QuantizeBuffers& out,
                  cudaStream_t stream);

}  // namespace ustrain::cuda
